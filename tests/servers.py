"""Real servers for the tests: a free loopback port, a process started and waited for, and stopped.

Every server a test starts listens on 127.0.0.1, logs to a file (a full pipe would block it), and is
waited for on a readiness URL within a bounded time; a server that dies or never answers fails the
test with the end of its log.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], ready: str, log: Path, timeout: float = 90, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Run ``cmd`` (output to ``log``) until ``ready`` answers 200; fail with its log if it never does."""
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(ready, timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{' '.join(cmd[:4])} did not start: {log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def wait_healthy(proc: subprocess.Popen, url: str, wait_s: float, poll: float = 0.2) -> str | None:
    """Wait until ``url/healthz`` answers 200; None when it does, else what went wrong (the caller
    reports it with the server's log)."""
    deadline = time.monotonic() + wait_s
    while True:
        if proc.poll() is not None:
            return f"exited with {proc.returncode}"
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return None
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            return f"did not answer /healthz in {wait_s} s"
        time.sleep(poll)


@contextmanager
def running(args: list[str], tmp: Path, env: dict[str, str] | None = None, wait_s: float = 60,
            preexec_fn: Any = None) -> Iterator[dict]:
    """``python -m edgewise.serve ARGS`` on a free port; yields its url, log file, port and pid; always
    stopped. ``preexec_fn`` runs in the child before the server starts (e.g. to set a resource limit)."""
    port = free_port()
    log = tmp / f"server-{port}.log"
    full_env = {**os.environ, "EDGEWISE_API_KEY": "", **(env or {})}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "edgewise.serve", "--port", str(port), *args],
                                stdout=out, stderr=subprocess.STDOUT, env=full_env, cwd=tmp, preexec_fn=preexec_fn)
    url = f"http://127.0.0.1:{port}"
    try:
        problem = wait_healthy(proc, url, wait_s)
        if problem:
            raise RuntimeError(f"the server {problem}: {log.read_text()[-2000:]}")
        yield {"url": url, "log": log, "port": port, "pid": proc.pid}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextmanager
def llama_cpp(tmp: Path, *, alias: str = "gemma-3-270m", n_ctx: int = 2048, chat_format: str = "gemma") -> Iterator[str]:
    """``python -m llama_cpp.server`` with the bundled Gemma 3 270M on a free loopback port; yields
    its OpenAI base URL (``http://127.0.0.1:PORT/v1``); always stopped. Needs the ``eval`` extra."""
    from edgewise.eval.backends import bundled_model_path

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    proc = start([sys.executable, "-m", "llama_cpp.server", "--model", str(bundled_model_path()), "--model_alias", alias,
                  "--chat_format", chat_format, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
                  "--n_threads", "-1", "--n_threads_batch", "-1", "--verbose", "False"],
                 url + "/models", tmp / f"llama-{port}.log", env={"OMP_WAIT_POLICY": "PASSIVE"})
    try:
        yield url
    finally:
        stop(proc)


LANCE_REST = """
import sys, time
import lance.namespace
with lance.namespace.RestAdapter("dir", {"root": sys.argv[1]}, host="127.0.0.1", port=int(sys.argv[2])):
    while True:
        time.sleep(3600)
"""


@contextmanager
def lance_rest(tmp: Path) -> Iterator[str]:
    """A Lance REST namespace server (``pylance``'s ``RestAdapter``) over a folder in ``tmp``, on a
    free loopback port; yields its URL; always stopped."""
    port = free_port()
    root = tmp / "lance-root"
    root.mkdir()
    url = f"http://127.0.0.1:{port}"
    proc = start([sys.executable, "-c", LANCE_REST, str(root), str(port)], url + "/v1/namespace/%24/list",
                 tmp / f"lance-{port}.log")
    try:
        yield url
    finally:
        stop(proc)


class FakeCompletions:
    """An OpenAI-compatible ``/v1/completions`` endpoint in this process, on 127.0.0.1: each prompt is
    answered with ``answer(prompt)`` after ``delay`` seconds; ``prompts`` counts the requests."""

    def __init__(self, answer: Any, delay: float = 0.0) -> None:
        import json
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from threading import Thread

        outer = self
        self.prompts = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                prompt = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["prompt"]
                outer.prompts += 1
                time.sleep(delay)
                body = json.dumps({"choices": [{"text": answer(prompt)}],
                                   "usage": {"prompt_tokens": len(prompt) // 4}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
