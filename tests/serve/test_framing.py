"""A request whose body could have two lengths gets the same 400, at once, under either HTTP parser.

``Content-Length`` given twice or as a list, ``Content-Length`` beside ``Transfer-Encoding``, a
``Transfer-Encoding`` other than one ``chunked``: h11 alone took some of them (``28, 28`` was a 200)
and waited on others for a chunked body that never came (a 408 after ``--timeout``); httptools
refused them in its own words. Each case is sent over a raw socket (a client library would not
send them) to a real server under ``--http h11`` and ``--http httptools``.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from edgewise.serve.transport.connections import framing_problem

from ..conftest import ROOT
from ..servers import running

pytest.importorskip("fastapi")
pytest.importorskip("httptools")

PARSERS = ["h11", "httptools"]
BODY = b'{"query":"q","chunks":["a"]}'  # 28 bytes
HEAD = b"POST /v1/pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
CHUNKED_BODY = b"1c\r\n" + BODY + b"\r\n0\r\n\r\n"
PREFIX = "the request is not valid HTTP/1.1: "
BOTH = "Content-Length and Transfer-Encoding may not both be given (the body would have two lengths)"

CASES = {  # name: (raw request, the message after PREFIX)
    "a list": (HEAD + b"Content-Length: 28, 28\r\n\r\n" + BODY,
               "Content-Length must be given once, as one number, but it came as a list"),
    "twice, the same": (HEAD + b"Content-Length: 28\r\nContent-Length: 28\r\n\r\n" + BODY,
                        "Content-Length must be given once, as one number, but it came 2 times"),
    "twice, different": (HEAD + b"Content-Length: 28\r\ncontent-length: 5\r\n\r\n" + BODY,
                         "Content-Length must be given once, as one number, but it came 2 times"),
    "with chunked, the body plain": (HEAD + b"Content-Length: 28\r\nTransfer-Encoding: chunked\r\n\r\n" + BODY, BOTH),
    "with chunked, the body chunked": (HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: 28\r\n\r\n" + CHUNKED_BODY,
                                       BOTH),
    "a coding besides chunked": (HEAD + b"Transfer-Encoding: gzip, chunked\r\n\r\n" + CHUNKED_BODY,
                                 "Transfer-Encoding must be chunked (the only coding served), but got 'gzip, chunked'"),
    "chunked twice": (HEAD + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + CHUNKED_BODY,
                      "Transfer-Encoding must be given once, as chunked, but it came 2 times"),
}


@pytest.fixture(scope="module", params=PARSERS)
def server(request: Any, tmp_path_factory: Any) -> Iterator[dict]:
    """One server per parser; ``--timeout 20``: a request that waited for its body would take that long."""
    tmp = tmp_path_factory.mktemp(request.param)
    with running(["--http", request.param, "--timeout", "20"], tmp, env={"PYTHONPATH": str(ROOT / "src")},
                 wait_s=90) as s:
        yield {**s, "parser": request.param}


def exchange(port: int, raw: bytes, timeout: float = 30) -> tuple[bytes, float]:
    """Send ``raw`` and read until the server closes; what came back and how long it took."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        data = b""
        while True:
            try:
                piece = s.recv(65536)
            except ConnectionResetError:
                break
            if not piece:
                break
            data += piece
    return data, time.monotonic() - start


def responses(raw: bytes) -> list[tuple[int, dict[str, str], Any]]:
    """The responses in ``raw`` (each with a Content-Length), in order."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}
        n = int(headers["content-length"])
        out.append((int(lines[0].split()[1]), headers, json.loads(rest[:n])))
        raw = rest[n:]
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_a_body_with_two_possible_lengths_is_the_same_400_at_once(server, case):
    raw, message = CASES[case]
    data, took = exchange(server["port"], raw)
    [(status, headers, body)] = responses(data)
    assert (status, body) == (400, {"error": {"type": "edgewise_bad_request", "message": PREFIX + message}}), \
        server["parser"]
    assert (headers["content-type"], headers["x-edgewise-error"], headers["connection"]) == \
        ("application/json", "1", "close")
    assert took < 5, took  # at once: not after --timeout (20 s), nor after the keep-alive


def test_a_pipelined_request_with_two_lengths_is_refused(server):
    """A sound request, then one with two lengths in the same packet. h11 buffers the second while
    the first is answered: it is checked before h11 reads it, and refused after the first's 200.
    httptools reads both heads at once and refuses the second in its own words, closing the
    connection before the first is answered (as it does for any malformed pipelined request)."""
    sound = HEAD + b"Content-Length: 28\r\n\r\n" + BODY
    data, took = exchange(server["port"], sound + CASES["twice, the same"][0])
    got = responses(data)
    status, _, refused = got[-1]
    assert (status, refused["error"]["type"]) == (400, "edgewise_bad_request")
    if server["parser"] == "h11":
        assert [s for s, _, _ in got] == [200, 400]
        assert refused["error"]["message"] == PREFIX + CASES["twice, the same"][1]
    assert took < 5, took


def test_sound_framings_are_still_served(server):
    """One Content-Length, or chunked alone (any case): a 200, and the connection kept for the next request."""
    for raw in (HEAD + b"Content-Length: 28\r\n\r\n" + BODY, HEAD + b"Transfer-Encoding: Chunked\r\n\r\n" + CHUNKED_BODY,
                HEAD + b"content-length:28\r\n\r\n" + BODY):
        data, _ = exchange(server["port"], raw + b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        [(status, _, packed), (health, _, ok)] = responses(data)
        assert (status, sorted(packed), health, ok) == (200, ["debug_info", "messages", "prompt"], 200,
                                                        {"status": "ok"}), (server["parser"], raw[:80])


@pytest.mark.parametrize("case", list(CASES))
def test_a_head_sent_a_byte_at_a_time_gets_the_same_answer(server, case):
    """httptools stops at the comma of ``Content-Length: 28,``, before the head has ended: the
    message is still the one the whole head gets."""
    raw, message = CASES[case]
    head = raw[: raw.index(b"\r\n\r\n") + 4]
    with socket.create_connection(("127.0.0.1", server["port"]), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            for i in range(len(head)):
                s.sendall(head[i:i + 1])
                time.sleep(0.001)
            s.sendall(raw[len(head):])
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before all of it was sent
        data = b""
        while piece := s.recv(65536):
            data += piece
    [(status, _, body)] = responses(data)
    assert (status, body["error"]["message"]) == (400, PREFIX + message), server["parser"]


def test_framing_problem_reads_only_whole_heads():
    assert framing_problem(b"POST / HTTP/1.1\r\nContent-Length: 1,1\r\n") is None  # the head has not ended
    assert framing_problem(b"\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n") is not None
    assert framing_problem(b"POST / HTTP/1.1\nContent-Length: 1\nTransfer-Encoding: chunked\n\n") == BOTH
    assert framing_problem(b"POST / HTTP/1.1\r\nX-Content-Length: 1, 2\r\nContent-Length: 3\r\n\r\n") is None
    assert framing_problem(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nContent-Length: 1, 2\r\n\r\n") is None  # the body's
