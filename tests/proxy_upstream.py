"""A loopback fake of an OpenAI-compatible upstream, for the proxy's tests.

A real HTTP server (stdlib ``ThreadingHTTPServer``) on 127.0.0.1 that answers the paths an OpenAI
client calls: ``GET /v1/models``, ``POST /v1/embeddings`` (float or base64, as the openai client
asks), ``POST /v1/completions`` and ``POST /v1/chat/completions`` (plain or streamed),
``POST /v1/responses`` (a Response object, or with ``stream: true`` the event stream of OpenAI's
published schema: ``response.created``, ``response.in_progress``, ``response.output_item.added``,
``response.content_part.added``, ``response.output_text.delta``..., ``response.output_text.done``,
``response.content_part.done``, ``response.output_item.done``, ``response.completed``), and for the
memory tests replies of any size made on the fly (``GET /v1/blobs/{bytes}``, a chat completion with
model ``big-{bytes}``, and with model ``text-{bytes}`` one whose answer is that many bytes of text,
sent chunked), and a slow answer (``GET /v1/sleep/{seconds}``). ``POST``/``PUT`` to ``/v1/uploads``
count and hash the body as it arrives.

Every request is recorded in ``seen``: ``(method, path with query, headers, body)``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fake-model"
ANSWER = ["Par", "is", " is the capital."]  # the reply's text deltas
BLOCK = bytes(range(256)) * 256  # 64 KiB


def blob_chunks(size: int) -> Iterator[bytes]:
    """``size`` bytes made block by block (never held whole): what ``/v1/blobs/{size}`` sends."""
    left = size
    while left > 0:
        piece = BLOCK[: min(left, len(BLOCK))]
        left -= len(piece)
        yield piece


def big_chat_chunks(size: int) -> Iterator[bytes]:
    """A chat completion JSON of exactly ``size`` bytes, its padding made piece by piece."""
    head = b'{"object":"chat.completion","choices":[],"pad":"'
    tail = b'"}'
    yield head
    left = size - len(head) - len(tail)
    while left > 0:
        n = min(left, 65536)
        yield b"x" * n
        left -= n
    yield tail


def big_text_chunks(size: int) -> Iterator[bytes]:
    """A chat completion whose answer is ``size`` bytes of text, made piece by piece (no length is
    known up front: it is sent chunked)."""
    yield b'{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"'
    left = size
    while left > 0:
        n = min(left, 65536)
        yield b"la " * (n // 3) + b"l" * (n % 3)
        left -= n
    yield b'"},"finish_reason":"length"}]}'


def embedding(text: str) -> list[float]:
    return [float(len(text)), float(sum(map(ord, text)) % 997), 0.5]


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no wait for a delayed ACK between them
    server: FakeOpenAI

    def log_message(self, *args: object) -> None:  # quiet
        pass

    # -- reading ----------------------------------------------------------------------------------

    def _pieces(self) -> Iterator[bytes]:
        """The request body as it arrives: Content-Length or chunked."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return
                yield self.rfile.read(size)
                self.rfile.readline()
        left = int(self.headers.get("Content-Length", 0))
        while left > 0:
            piece = self.rfile.read(min(left, 65536))
            if not piece:
                return
            left -= len(piece)
            yield piece

    def _record(self, body: bytes) -> None:
        self.server.seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))

    # -- writing ----------------------------------------------------------------------------------

    def _json(self, obj: object, status: int = 200, headers: list[tuple[str, str]] = ()) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        for k, v in [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *headers]:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _sized(self, size: int, kind: str, chunks: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        try:
            for piece in chunks:
                self.wfile.write(piece)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _chunked(self, kind: str, chunks: Iterator[bytes]) -> None:
        """A reply of unknown length: HTTP/1.1 chunked, each piece as it is made."""
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for piece in chunks:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _events(self, events: list[tuple[str | None, object]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for name, data in events:
            text = data if isinstance(data, str) else json.dumps(data)
            self.wfile.write((f"event: {name}\n" if name else "").encode() + f"data: {text}\n\n".encode())
            self.wfile.flush()

    # -- routes -----------------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802
        self._record(b"".join(self._pieces()))
        if self.path.split("?")[0] == "/v1/models":
            self._json({"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "fake"}]},
                       headers=[("x-upstream", "fake"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")])
        elif self.path.startswith("/v1/sleep/"):  # answers after that many seconds
            time.sleep(float(self.path.rsplit("/", 1)[1]))
            self._json({"slept": True})
        elif self.path.startswith("/v1/blobs/"):
            size = int(self.path.rsplit("/", 1)[1])
            self._sized(size, "application/octet-stream", blob_chunks(size))
        else:
            self._json({"error": {"message": f"no such path {self.path}", "type": "not_found"}}, 404)

    do_HEAD = do_GET  # noqa: N815
    do_DELETE = do_GET  # noqa: N815

    def do_PUT(self) -> None:  # noqa: N802
        self.do_POST()

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?")[0]
        if path == "/v1/uploads":  # hashed as it arrives, never held
            digest, n = hashlib.sha256(), 0
            for piece in self._pieces():
                digest.update(piece)
                n += len(piece)
            self._record(b"")
            self._json({"bytes": n, "sha256": digest.hexdigest(),
                        "chunked": self.headers.get("Transfer-Encoding", "") == "chunked"})
            return
        raw = b"".join(self._pieces())
        self._record(raw)
        try:  # an integer too long for int() is read as a float: what matters is the raw body, recorded
            body = json.loads(raw, parse_int=lambda s: int(s) if len(s) <= 4000 else float(s))
        except ValueError as e:
            self._json({"error": {"message": f"the fake could not read the body: {e}", "type": "invalid_request"}}, 400)
            return
        route = {"/v1/embeddings": self._embeddings, "/v1/completions": self._completions,
                 "/v1/chat/completions": self._chat, "/v1/responses": self._responses}.get(path)
        if route is None:
            self._json({"error": {"message": f"no such path {path}", "type": "not_found"}}, 404)
        else:
            route(body)

    def _embeddings(self, body: dict) -> None:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(texts):
            vector = embedding(text)
            if body.get("encoding_format") == "base64":
                data.append({"object": "embedding", "index": i,
                             "embedding": base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()})
            else:
                data.append({"object": "embedding", "index": i, "embedding": vector})
        self._json({"object": "list", "data": data, "model": body["model"],
                    "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}})

    def _completions(self, body: dict) -> None:
        text = f"echo: {body['prompt']}"
        if not body.get("stream"):
            self._json({"id": "cmpl-1", "object": "text_completion", "created": 0, "model": body["model"],
                        "choices": [{"text": text, "index": 0, "finish_reason": "stop", "logprobs": None}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
            return
        chunks = [{"id": "cmpl-1", "object": "text_completion", "created": 0, "model": body["model"],
                   "choices": [{"text": word, "index": 0, "finish_reason": None, "logprobs": None}]}
                  for word in text.split(" ")]
        self._events([(None, c) for c in chunks] + [(None, "[DONE]")])

    def _chat(self, body: dict) -> None:
        model = body.get("model", "")
        if model.startswith("big-"):
            size = int(model.removeprefix("big-"))
            self._sized(size, "application/json", big_chat_chunks(size))
        elif model.startswith("text-"):  # an answer of that many bytes, whatever max_tokens says
            self._chunked("application/json", big_text_chunks(int(model.removeprefix("text-"))))
        else:
            self._json({"object": "chat.completion", "received": body}, headers=[("x-upstream", "fake")])

    def _responses(self, body: dict) -> None:
        text = "".join(ANSWER)
        if not body.get("stream"):
            self._json(response_object(body, "completed", text))
            return
        self._events([(e["type"], e) for e in response_events(body)])


def _message(text: str | None, status: str) -> dict:
    content = [] if text is None else [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {"id": "msg_1", "type": "message", "role": "assistant", "status": status, "content": content}


def response_object(body: dict, status: str, text: str | None) -> dict:
    """A Response as OpenAI's schema has it (``object: "response"``), echoing the request's settings."""
    return {"id": "resp_1", "object": "response", "created_at": 0, "status": status, "model": body["model"],
            "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
            "output": [] if text is None else [_message(text, "completed")],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "temperature": 1.0, "top_p": 1.0,
            "error": None, "incomplete_details": None, "metadata": {},
            "usage": None if text is None else {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13,
                                                "input_tokens_details": {"cached_tokens": 0},
                                                "output_tokens_details": {"reasoning_tokens": 0}}}


def response_events(body: dict) -> list[dict]:
    """The streamed events of one text reply, in OpenAI's order, numbered by ``sequence_number``."""
    text = "".join(ANSWER)
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    events: list[dict] = [
        {"type": "response.created", "response": response_object(body, "in_progress", None)},
        {"type": "response.in_progress", "response": response_object(body, "in_progress", None)},
        {"type": "response.output_item.added", "output_index": 0, "item": _message(None, "in_progress")},
        {"type": "response.content_part.added", **where,
         "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}},
        *({"type": "response.output_text.delta", **where, "delta": d, "logprobs": []} for d in ANSWER),
        {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **where,
         "part": {"type": "output_text", "text": text, "annotations": [], "logprobs": []}},
        {"type": "response.output_item.done", "output_index": 0, "item": _message(text, "completed")},
        {"type": "response.completed", "response": response_object(body, "completed", text)},
    ]
    return [{**e, "sequence_number": i} for i, e in enumerate(events)]


def start_proxy(tmp, upstream_url: str, *extra: str, env: dict[str, str] | None = None):
    """``edgewise serve --upstream URL`` on a free loopback port: ``(process, base URL)``; stop it with
    :func:`tests.servers.stop`."""
    import sys

    from .servers import free_port, start

    port = free_port()
    cmd = [sys.executable, "-m", "edgewise", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--upstream", upstream_url, *extra]
    env = {"EDGEWISE_API_KEY": "", "EDGEWISE_UPSTREAM_API_KEY": "", **(env or {})}
    return start(cmd, f"http://127.0.0.1:{port}/healthz", tmp / f"edgewise-{port}.log", timeout=60, env=env), \
        f"http://127.0.0.1:{port}"


def rss_mb(pid: int) -> float:
    """The resident memory of process ``pid`` in MB, from ``/proc/PID/status`` (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")
