"""The proxy against a fake upstream that misbehaves on purpose: down, slow, rate-limited, failing,
hanging up, streaming to a client that leaves; and a client that sends too much or too slowly.

The fake upstream is a real HTTP server on 127.0.0.1 (stdlib ``ThreadingHTTPServer``); what it does
is chosen by the request's ``model`` (the proxy forwards it as sent). The edgewise server is a real
``edgewise serve`` process. Every wait is bounded; nothing leaves the loopback interface.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from edgewise import pack

from ..servers import free_port, start, stop

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

SERVE = [sys.executable, "-m", "edgewise", "serve"]  # `edgewise serve`
EDGEWISE_KEY, UPSTREAM_KEY = "edgewise-key", "upstream-key"
STREAM_EVENTS = 100  # at 0.05 s apart: 5 s if nobody hangs up
RATE_LIMITED = b'{"error": {"message": "slow down", "type": "rate_limit_exceeded"}}'



class FakeUpstream(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.seen: list[tuple[str, dict[str, str], bytes]] = []
        self.events: list[str] = []
        self.disconnected = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


def sse(i: int) -> bytes:
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": f"w{i} "}}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeUpstream

    def log_message(self, *args) -> None:  # quiet
        pass

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        try:
            mode = json.loads(body).get("model")
        except ValueError:
            mode = "echo"
        if mode == "rate-limited":
            self._reply(429, RATE_LIMITED, {"Retry-After": "7", "x-ratelimit-remaining-requests": "0"})
        elif mode == "failing":
            self._reply(503, b"upstream overloaded", {"Content-Type": "text/plain"})
        elif mode == "slow":
            time.sleep(3)  # past the proxy's 1 s upstream timeout
            self._reply(200, b"{}")
        elif mode == "hang-up":  # read the request, then close without a word
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif mode == "stream":
            self._stream()
        elif mode == "wait-for-hang-up":  # a long generation: answers in 10 s unless the caller leaves first
            self._wait_for_hang_up()
        elif mode == "stream-break":  # chunked, cut off mid-stream: the end is not a clean one
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(3):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(sse(i)), sse(i)))
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        else:
            self._reply(200, json.dumps({"object": "chat.completion", "received": body.decode()}).encode(),
                        {"x-upstream": "fake"})

    def _wait_for_hang_up(self) -> None:
        self.connection.settimeout(0.05)
        for _ in range(200):
            try:
                if self.connection.recv(1, socket.MSG_PEEK) == b"":  # the peer closed the connection
                    self.server.events.append("hung up while waiting")
                    self.server.disconnected.set()
                    return
            except TimeoutError:
                pass
        self._reply(200, b"{}")

    def _stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for i in range(STREAM_EVENTS):
                self.wfile.write(sse(i))
                self.wfile.flush()
                time.sleep(0.05)
            self.wfile.write(b"data: [DONE]\n\n")
            self.server.events.append("finished")
        except (BrokenPipeError, ConnectionResetError):
            self.server.events.append(f"disconnected after {i} events")
            self.server.disconnected.set()


@pytest.fixture(scope="module")
def upstream():
    server = FakeUpstream()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def start_edgewise(tmp: Path, upstream_url: str, *extra: str, env: dict[str, str] | None = None):
    """``edgewise serve`` on a free loopback port; returns (process, base URL)."""
    port = free_port()
    log = tmp / f"edgewise-{port}.log"
    cmd = [*SERVE, "--host", "127.0.0.1", "--port", str(port),
           "--upstream", upstream_url, *extra]
    return start(cmd, f"http://127.0.0.1:{port}/healthz", log, timeout=30, env=env), f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    proc, base = start_edgewise(tmp_path_factory.mktemp("proxy"), upstream.url, "--upstream-timeout", "1",
                                "--timeout", "2", "--max-body-bytes", "65536")
    yield base
    stop(proc)


def chat(model: str, **extra) -> dict:
    return {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "What is the capital of France?"}],
            **extra}


DOCS = {"documents": [{"id": "p", "text": "Paris is the capital of France."}], "context_window": 4096,
        "tokenizer": "cl100k_base"}


def test_a_request_without_documents_goes_through_byte_for_byte(proxy, upstream):
    raw = b'{ "model":"echo",  "messages":[{"role":"user","content":"caf\\u00e9 \xc3\xa9"}], "z": [1,2 ,3]}'
    r = httpx.post(proxy + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"}, timeout=10)
    path, headers, body = upstream.seen[-1]
    assert (r.status_code, path, body) == (200, "/v1/chat/completions", raw)
    assert r.json() == {"object": "chat.completion", "received": raw.decode()}
    assert r.headers["x-upstream"] == "fake" and "x-edgewise-prompt-tokens" not in r.headers


def test_documents_are_packed_and_the_field_removed(proxy, upstream):
    r = httpx.post(proxy + "/v1/chat/completions", json=chat("echo", edgewise=DOCS), timeout=10)
    assert r.status_code == 200, r.text
    sent = json.loads(upstream.seen[-1][2])
    assert set(sent) == {"model", "max_tokens", "messages"}
    budget = int(r.headers["x-edgewise-documents-budget"])
    expected = pack("What is the capital of France?", DOCS["documents"], budget=budget, tokenizer="cl100k_base")
    assert sent["messages"] == [{"role": "user", "content": expected.prompt}]
    assert json.loads(r.json()["received"]) == sent
    assert r.headers["x-edgewise-budget"] == str(4096 - 16)
    assert r.headers["x-edgewise-dropped"] == "0" and r.headers["x-edgewise-dropped-messages"] == "0"
    assert 0 < int(r.headers["x-edgewise-prompt-tokens"]) <= 4096 - 16


def test_debug_on_request(proxy, upstream):
    r = httpx.post(proxy + "/v1/chat/completions", json=chat("echo", edgewise={**DOCS, "debug": True}), timeout=10)
    body = r.json()
    assert body["edgewise"]["pack"]["placed"] == ["p"]
    assert json.loads(r.headers["x-edgewise-debug"]) == {k: v for k, v in body["edgewise"].items() if k != "pack"} | {
        "dropped_messages": []}


def test_rate_limit_comes_back_as_sent(proxy, upstream):
    n = len(upstream.seen)
    r = httpx.post(proxy + "/v1/chat/completions", json=chat("rate-limited", edgewise=DOCS), timeout=10)
    assert (r.status_code, r.content) == (429, RATE_LIMITED)
    assert (r.headers["retry-after"], r.headers["x-ratelimit-remaining-requests"]) == ("7", "0")
    assert "x-edgewise-prompt-tokens" in r.headers
    assert "x-edgewise-error" not in r.headers  # the model's error, not edgewise's: relayed unmarked
    assert len(upstream.seen) == n + 1  # a 429 is the upstream's answer: never retried by the proxy


def test_upstream_5xx_comes_back_as_sent(proxy):
    r = httpx.post(proxy + "/v1/chat/completions", json=chat("failing"), timeout=10)
    assert (r.status_code, r.content, r.headers["content-type"]) == (503, b"upstream overloaded", "text/plain")
    assert "x-edgewise-error" not in r.headers


@pytest.mark.slow  # a server of its own, or a wait for a timeout: seconds
def test_slow_upstream_is_a_504(proxy):
    r = httpx.post(proxy + "/v1/chat/completions", json=chat("slow", edgewise=DOCS), timeout=10)
    assert (r.status_code, r.headers["x-edgewise-error"]) == (504, "1")  # edgewise's own: marked
    assert r.json() == {"error": {"type": "edgewise_upstream_timeout", "message":
                                  "the upstream did not answer within upstream_timeout_s=1 seconds (ReadTimeout)"}}


def test_an_upstream_that_hangs_up_is_a_502_and_not_retried(proxy, upstream):
    n = len(upstream.seen)
    r = httpx.post(proxy + "/v1/chat/completions", json=chat("hang-up"), timeout=10)
    assert r.status_code == 502
    assert r.json()["error"]["type"] == "edgewise_upstream_unavailable"
    assert len(upstream.seen) == n + 1  # the request went out: repeating it could run it twice


@pytest.mark.slow  # a server of its own, or a wait for a timeout: seconds
def test_upstream_down_is_a_502(tmp_path):
    port = free_port()  # nothing listens there
    proc, base = start_edgewise(tmp_path, f"http://127.0.0.1:{port}/v1")
    try:
        r = httpx.post(base + "/v1/chat/completions", json=chat("echo"), timeout=10)
    finally:
        stop(proc)
    assert r.status_code == 502
    error = r.json()["error"]
    assert error["type"] == "edgewise_upstream_unavailable"
    assert error["message"].startswith("the upstream could not be reached (ConnectError: ")
    assert error["message"].endswith("; tried 3 times")


@pytest.mark.slow  # a server of its own, or a wait for a timeout: seconds
def test_a_stream_is_relayed_whole(proxy):
    with httpx.stream("POST", proxy + "/v1/chat/completions", json=chat("stream", stream=True), timeout=10) as r:
        assert r.headers["content-type"] == "text/event-stream"
        body = r.read()
    assert body == b"".join(sse(i) for i in range(STREAM_EVENTS)) + b"data: [DONE]\n\n"


def test_a_broken_upstream_stream_is_not_passed_off_as_complete(proxy):
    received = b""
    with pytest.raises(httpx.RemoteProtocolError):  # the client sees the cut, not a clean end
        with httpx.stream("POST", proxy + "/v1/chat/completions", json=chat("stream-break", stream=True),
                          timeout=10) as r:
            for chunk in r.iter_raw():
                received += chunk
    assert received == sse(0) + sse(1) + sse(2)


def open_streams(base: str) -> float:
    for line in httpx.get(base + "/metrics", timeout=5).text.splitlines():
        if line.startswith("edgewise_proxy_open_streams "):
            return float(line.split()[1])
    raise AssertionError("no edgewise_proxy_open_streams in /metrics")


def test_a_client_leaving_mid_stream_closes_the_upstream_stream(proxy, upstream):
    upstream.disconnected.clear()
    with httpx.stream("POST", proxy + "/v1/chat/completions", json=chat("stream", stream=True, edgewise=DOCS),
                      timeout=10) as r:
        chunks = r.iter_raw()  # held: a dropped iterator would close the response at once
        assert next(chunks).startswith(b"data: ")
        assert open_streams(proxy) == 1.0
    # the client hung up after one chunk: the upstream sees it long before its 5 s stream ends
    assert upstream.disconnected.wait(4), upstream.events
    assert upstream.events[-1].startswith("disconnected after ")
    deadline = time.monotonic() + 5
    while open_streams(proxy) != 0.0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert open_streams(proxy) == 0.0


@pytest.mark.slow  # a server of its own, or a wait for a timeout: seconds
def test_a_client_leaving_before_the_answer_cancels_the_upstream_call(upstream, tmp_path):
    upstream.disconnected.clear()
    proc, base = start_edgewise(tmp_path, upstream.url)  # upstream timeout 300 s: only the client's leaving ends it
    try:
        with pytest.raises(httpx.ReadTimeout):  # the client gives up after 0.5 s and closes its connection
            httpx.post(base + "/v1/chat/completions", json=chat("wait-for-hang-up", edgewise=DOCS),
                       timeout=httpx.Timeout(10, read=0.5))
        assert upstream.disconnected.wait(8), upstream.events
        assert upstream.events[-1] == "hung up while waiting"
        assert httpx.get(base + "/healthz", timeout=5).status_code == 200
    finally:
        stop(proc)


def test_an_oversized_body_is_a_413(proxy, upstream):
    n = len(upstream.seen)
    big = chat("echo", edgewise={**DOCS, "documents": ["x" * 70_000]})
    r = httpx.post(proxy + "/v1/chat/completions", json=big, timeout=10)
    assert r.status_code == 413 and r.json()["error"]["type"] == "edgewise_body_too_large"
    assert len(upstream.seen) == n


@pytest.mark.slow  # a server of its own, or a wait for a timeout: seconds
def test_a_slow_body_is_a_408(proxy, upstream):
    n = len(upstream.seen)
    host, port = proxy.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{\"model\":")
        reply = b""
        while chunk := s.recv(65536):  # the server's answer after its 2 s body deadline, then it closes
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ")
    assert json.loads(body)["error"]["type"] == "edgewise_request_timeout"
    assert len(upstream.seen) == n


@pytest.mark.slow  # a server of its own, or a wait for a timeout: seconds
def test_the_edgewise_key_never_reaches_the_upstream(upstream, tmp_path):
    proc, base = start_edgewise(tmp_path, upstream.url,
                                env={"EDGEWISE_API_KEY": EDGEWISE_KEY, "EDGEWISE_UPSTREAM_API_KEY": UPSTREAM_KEY})
    try:
        denied = httpx.post(base + "/v1/chat/completions", json=chat("echo"), timeout=10)
        ok = httpx.post(base + "/v1/chat/completions", json=chat("echo"), timeout=10,
                        headers={"Authorization": f"Bearer {EDGEWISE_KEY}"})
    finally:
        stop(proc)
    assert denied.status_code == 401
    assert ok.status_code == 200
    assert upstream.seen[-1][1]["authorization"] == f"Bearer {UPSTREAM_KEY}"
