"""``edgewise serve`` under clients that take too long, send too much or come in too great numbers.

Each test starts the real server (``python -m edgewise.serve``) on a free loopback port, with each
HTTP parser uvicorn can use (``--http h11``, ``--http httptools``), and speaks raw HTTP over a
socket where a client library would hide what the server does. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import resource
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import edgewise

from ..conftest import ROOT
from ..servers import running

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("httptools")

PARSERS = ["h11", "httptools"]


def serve(tmp: Path, *args: str, fds: int | None = None) -> Any:
    """The server on a free port (descriptor limit ``fds`` when given); yields url, port, pid; always stopped."""

    def limit() -> None:
        if fds is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fds, fds))

    return running(list(args), tmp, env={"PYTHONPATH": str(ROOT / "src")}, wait_s=90, preexec_fn=limit)


def connect(port: int, data: bytes = b"", timeout: float = 10) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if data:
        s.sendall(data)
    return s


def read_all(s: socket.socket) -> bytes:
    """Everything until the server closes (a socket timeout fails the test: it was never closed)."""
    data = b""
    while True:
        try:
            piece = s.recv(65536)
        except ConnectionResetError:
            return data
        if not piece:
            return data
        data += piece


def response(raw: bytes) -> tuple[int, dict[str, str], object]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, json.loads(body) if body else None


def status_file(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def error(status: int, type: str, message: str) -> tuple[int, dict]:
    return status, {"error": {"type": type, "message": message}}


# -- headers: their time, their bytes, their count ------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("parser", PARSERS)
def test_slow_silent_and_idle_connections_are_cut(tmp_path, parser):
    with serve(tmp_path, "--http", parser, "--header-timeout", "1", "--keep-alive", "1") as server:
        port = server["port"]
        silent = connect(port)
        trickle = connect(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        kept = connect(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        for _ in range(4):  # a byte every 0.2 s: within any read timeout, past the header timeout
            time.sleep(0.2)
            try:
                trickle.sendall(b"X")
            except OSError:
                break
        status, headers, body = response(read_all(trickle))
        assert (status, body) == error(408, "edgewise_request_timeout", "the request line and headers did not "
                                       "arrive within 1 s (--header-timeout); 36 bytes came")
        assert headers["x-edgewise-error"] == "1"
        assert read_all(silent) == b""  # closed, without a word: it never asked anything
        status, _, body = response(kept.recv(65536))
        assert (status, body) == (200, {"status": "ok"})
        assert read_all(kept) == b""  # kept alive 1 s, then closed
        for s in (silent, trickle, kept):
            s.close()


@pytest.mark.slow
@pytest.mark.parametrize("parser", PARSERS)
def test_a_50_mb_header_is_refused_at_the_limit_without_growing_the_server(tmp_path, parser):
    with serve(tmp_path, "--http", parser) as server:
        rss_before = status_file(server["pid"], "VmRSS")
        s = connect(server["port"], b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", timeout=20)
        sent, piece = 0, b"a" * (1024 * 1024)
        try:
            while sent < 50 * len(piece) and not select.select([s], [], [], 0)[0]:
                s.sendall(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, headers, body = response(read_all(s))
        s.close()
        assert (status, body) == error(431, "edgewise_headers_too_large", "the request line and headers may be at "
                                       "most 32768 bytes (--max-header-bytes)")
        assert (headers["connection"], headers["x-edgewise-error"]) == ("close", "1")
        assert sent < 50 * len(piece)  # refused while it came, not after
        assert status_file(server["pid"], "VmRSS") - rss_before < 20 * 1024  # kB: nothing of it was held
        many = b"".join(b"X-H%d: v\r\n" % i for i in range(150))
        s = connect(server["port"], b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
        status, _, body = response(read_all(s))
        s.close()
        assert (status, body) == error(431, "edgewise_headers_too_large", "a request may carry at most 100 headers "
                                       "(--max-headers), but got 151")
        assert httpx.get(f"{server['url']}/healthz", headers={"X-Ok": "v" * 30000}).json() == {"status": "ok"}


@pytest.mark.slow
@pytest.mark.parametrize("parser", PARSERS)
def test_a_flood_of_silent_connections_leaves_healthz_reachable(tmp_path, parser):
    """400 connections that never send a byte, at a 256-descriptor limit: the oldest idle ones make
    room, so a probe still gets in and the server never runs out of descriptors."""
    with serve(tmp_path, "--http", parser, "--header-timeout", "60", fds=256) as server:
        flood = []
        try:
            for _ in range(400):
                flood.append(connect(server["port"]))
            time.sleep(0.5)  # accepted by now
            answered = None
            for _ in range(5):
                try:
                    answered = httpx.get(f"{server['url']}/healthz", timeout=3).json()
                    break
                except httpx.TransportError:
                    time.sleep(0.5)
            assert answered == {"status": "ok"}
            assert len(os.listdir(f"/proc/{server['pid']}/fd")) < 256
        finally:
            for s in flood:
                s.close()
        assert "--max-connections 1000 needs 1064 file descriptors, but this process may open 256: " \
               "holding at most 192 connections" in server["log"].read_text()


@pytest.mark.parametrize("parser", PARSERS)
def test_a_malformed_content_length_is_a_json_400(tmp_path, parser):
    detail = {"h11": "bad Content-Length", "httptools": "Invalid character in Content-Length"}[parser]
    with serve(tmp_path, "--http", parser) as server:
        s = connect(server["port"], b"POST /v1/pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                    b"Content-Length: 12abc\r\n\r\n{}")
        status, headers, body = response(read_all(s))
        s.close()
    assert (status, body) == error(400, "edgewise_bad_request", f"the request is not valid HTTP/1.1: {detail}")
    assert (headers["content-type"], headers["x-edgewise-error"]) == ("application/json", "1")


# -- admission: threads and a queue ---------------------------------------------------------------

HEAVY = {"query": "rivers", "key_id": "chunk-0", "positions": list(range(400)),
         "chunks": [f"Passage {i} talks about rivers and mountains number {i}. It has two sentences." for i in range(400)]}


def _settled(pid: int, still_s: float = 1.5, within_s: float = 40) -> float:
    """The process's CPU time once it has stopped growing for ``still_s``; fails if it never stops."""
    deadline = time.monotonic() + within_s
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(still_s)
        now = cpu_seconds(pid)
        if now - last < 0.1:
            return now
        last = now
    pytest.fail(f"the server was still burning CPU {within_s} s after its requests ended")


@pytest.mark.slow
def test_a_burst_of_heavy_requests_is_bounded_by_threads_and_queue(tmp_path):
    with serve(tmp_path, "--threads", "2", "--queue", "2", "--timeout", "1") as server:
        pid, url = server["pid"], server["url"]
        threads_at_rest = status_file(pid, "Threads")
        start = cpu_seconds(pid)
        with httpx.Client(base_url=url, timeout=30) as client:  # what one request costs, run whole
            assert client.post("/v1/variants", json=HEAVY).status_code == 504
        one = _settled(pid) - start
        replies: list[httpx.Response] = []
        peak = [0]

        def call() -> None:
            with httpx.Client(base_url=url, timeout=30) as c:
                replies.append(c.post("/v1/variants", json=HEAVY))

        def watch(stop: threading.Event) -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], status_file(pid, "Threads"))
                time.sleep(0.05)

        stop = threading.Event()
        watcher = threading.Thread(target=watch, args=(stop,))
        watcher.start()
        before = _settled(pid)
        callers = [threading.Thread(target=call) for _ in range(24)]
        for t in callers:  # staggered: abandoned work that freed its place would start more threads
            t.start()
            time.sleep(0.1)
        for t in callers:
            t.join(60)
        after = _settled(pid)
        stop.set()
        watcher.join()
        statuses = sorted(r.status_code for r in replies)
        busy = [r for r in replies if r.status_code == 503]
        assert len(replies) == 24 and set(statuses) == {503, 504}
        assert busy[0].headers["retry-after"] == "1" and busy[0].json() == error(503, "edgewise_overloaded", (
            "the server is busy: 2 requests are being worked on and 2 more are waiting (--threads, --queue); "
            "retry in 1 s"))[1]
        # the pool's 2 threads (started by the first request) and at most one more (the watcher's reads race)
        assert peak[0] <= threads_at_rest + 2 + 1, (threads_at_rest, peak[0])
        # what ran is what the 2 threads could take, a few of the 24; unbounded, every one of them runs whole
        assert after - before < 12 * one, (after - before, one)
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}


# -- files in --assets ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("assets")
    (root / "t.j2").write_text("Q: {{ query }}\n{% for c in chunks %}[{{ c.id }}] {{ c.text }}\n{% endfor %}")
    (root / "big.j2").write_text("{{ query }}" + "x" * 5000)
    os.mkfifo(root / "pipe.j2")
    (root / "zero.j2").symlink_to("/dev/zero")
    (root / "pipe-link.j2").symlink_to(root / "pipe.j2")
    return root


def _pack(client: httpx.Client, layout: str) -> tuple[int, dict]:
    r = client.post("/v1/pack", json={"query": "q", "chunks": ["a"], "options": {"layout": layout}})
    return r.status_code, r.json()


@pytest.mark.slow
def test_asset_files_must_be_regular_and_small(tmp_path, assets):
    with serve(tmp_path, "--assets", str(assets), "--max-asset-bytes", "4096", "--threads", "1", "--timeout", "5") as s:
        with httpx.Client(base_url=s["url"], timeout=10) as client:
            for name in ("pipe.j2", "pipe-link.j2", "pipe.j2"):  # one thread: a FIFO that blocked would hang the rest
                assert _pack(client, f"template:{name}") == error(
                    403, "edgewise_forbidden_path", f"layout 'template:{name}' names a FIFO; asset files must be "
                                                    "regular files")
            assert _pack(client, "template:zero.j2") == error(
                403, "edgewise_forbidden_path", "layout 'template:zero.j2' names a file outside the assets directory")
            assert _pack(client, "template:big.j2") == error(
                422, "edgewise_asset_too_large", "layout 'template:big.j2' names a file of 5011 bytes, but asset "
                                                 "files may be at most 4096 bytes (--max-asset-bytes)")
            assert _pack(client, "template:.") == error(  # the directory itself: named as the client did
                403, "edgewise_forbidden_path", "layout 'template:.' names a directory; asset files must be regular files")
            status, out = _pack(client, "template:t.j2")
            assert (status, out["prompt"]) == (200, edgewise.pack("q", ["a"], layout=f"template:{assets / 't.j2'}").prompt)


@pytest.mark.slow
def test_devices_in_the_assets_directory_are_refused(tmp_path):
    with serve(tmp_path, "--assets", "/dev", "--timeout", "5") as s:
        with httpx.Client(base_url=s["url"], timeout=10) as client:
            for name in ("zero", "null", "urandom"):
                assert _pack(client, f"template:{name}") == error(
                    403, "edgewise_forbidden_path", f"layout 'template:{name}' names a character device; asset files "
                                                    "must be regular files")
            r = client.post("/v1/pack", json={"query": "q", "chunks": ["a"], "options": {"order": "calibrated:zero"}})
            assert (r.status_code, r.json()) == error(
                403, "edgewise_forbidden_path", "order 'calibrated:zero' names a character device; asset files must "
                                                "be regular files")


# -- text that is not Unicode ---------------------------------------------------------------------

SURROGATE_BODIES = {
    "/v1/pack": (b'{"query": "q", "chunks": ["ok", "bad \\ud800 text"]}', "chunks[1]", 4),
    "/v1/score": (b'{"query": "q", "chunks": [{"text": "x\\udfff"}]}', "chunks[0].text", 1, "DFFF"),
    "/v1/highlight": (b'{"query": "q\\ud83d", "text": "t"}', "query", 1, "D83D"),
    "/v1/prune": (b'{"query": "q", "chunks": [{"text": "t", "meta": {"\\udc80k": 1}}]}', "a key of chunks[0].meta", 0,
                  "DC80"),
    "/v1/variants": (b'{"query": "q", "chunks": ["a"], "key_id": "chunk-0", "options": {"system": "\\ud800"}}',
                     "options.system", 0),
    "/v1/tokens": (b'{"text": "a\\ud800"}', "text", 1),
}


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Iterator[dict]:
    with serve(tmp_path_factory.mktemp("plain")) as server:
        yield server


@pytest.mark.parametrize("path", sorted(SURROGATE_BODIES))
def test_a_lone_surrogate_is_a_400_on_every_endpoint(plain, path):
    body, where, at, *code = SURROGATE_BODIES[path]
    r = httpx.post(plain["url"] + path, content=body, headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == error(400, "edgewise_invalid_json", (
        f"strings in the body must be valid Unicode, but {where} holds a lone surrogate (U+{(code or ['D800'])[0]}) "
        f"at character {at}"))
    assert r.headers["x-edgewise-error"] == "1"


def test_surrogate_bytes_are_refused_and_a_valid_pair_is_served(plain):
    raw = b'{"text": "a\xed\xa0\x80"}'  # a surrogate written as UTF-8-like bytes (json decodes them with surrogatepass)
    r = httpx.post(plain["url"] + "/v1/tokens", content=raw, headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == error(400, "edgewise_invalid_json", "strings in the body must be valid "
                                              "Unicode, but text holds a lone surrogate (U+D800) at character 1")
    r = httpx.post(plain["url"] + "/v1/tokens", content=b'{"text": "\\ud83d\\ude00", "tokenizer": "words"}',
                   headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == (200, {"tokenizer": "words", "estimated": True, "tokens": 2})


# -- error bodies of edgewise's own ---------------------------------------------------------------

def test_every_error_of_edgewise_is_marked_as_edgewise(plain):
    url = plain["url"]
    got = [httpx.get(f"{url}/v1/nope"), httpx.get(f"{url}/v1/pack"),
           httpx.post(f"{url}/v1/pack", content=b"{", headers={"content-type": "application/json"}),
           httpx.post(f"{url}/v1/pack", json={"query": "q", "chunks": ["a"], "options": {"top_k": 0}}),
           httpx.post(f"{url}/v1/pack", json={"query": "q", "chunks": ["a"], "options": {"layout": "template:t.j2"}}),
           httpx.post(f"{url}/v1/score", json={"query": "q", "chunks": ["a"], "scorer": "given"})]
    assert [(r.status_code, r.json()["error"]["type"], r.headers.get("x-edgewise-error")) for r in got] == [
        (404, "edgewise_not_found", "1"), (405, "edgewise_method_not_allowed", "1"), (400, "edgewise_invalid_json", "1"),
        (422, "edgewise_invalid_input", "1"), (403, "edgewise_forbidden_path", "1"), (422, "edgewise_invalid_input", "1")]
    assert got[5].json()["error"]["message"] == ("scorer 'given' keeps the chunks' own scores; name a scorer to score "
                                                 "with (bm25, dense ...)")


def test_the_library_reads_a_template_fifo_without_blocking(tmp_path):
    """What the server's check guards is also refused where the file is read (edgewise.files.cache)."""
    from edgewise.errors import ConfigError
    from edgewise.files.cache import load_cached

    fifo = tmp_path / "t.j2"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            load_cached(str(fifo), str, what="template file")
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # blocked in open(): let it go before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO blocked")
    assert [(type(e), str(e)) for e in outcome] == [(ConfigError, f"template file {str(fifo)!r} must be a regular "
                                                     "file, but it is not (a FIFO, a device or a directory)")]
