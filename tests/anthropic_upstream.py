"""A loopback fake of an Anthropic-compatible upstream, for the proxy's tests.

A real HTTP server (stdlib ``ThreadingHTTPServer``) on 127.0.0.1 that answers as Anthropic's API
reference describes: ``POST /v1/messages`` (a Message, or with ``stream: true`` the event stream:
``message_start``, then per content block ``content_block_start``, ``content_block_delta``...,
``content_block_stop``, with a ``ping`` after the first block starts, then ``message_delta`` and
``message_stop``), ``POST /v1/messages/count_tokens`` (``{"input_tokens": N}``), ``GET /v1/models``
and ``GET /v1/models/{id}``. It checks what the real API checks and a proxy could get wrong: the
``anthropic-version`` header and a key (``x-api-key`` or a bearer token), the required fields, and
no field it does not take ("Extra inputs are not permitted": the ``edgewise`` field must never
arrive). Errors are Anthropic's ``{"type": "error", "error": {"type", "message"}}`` with its status.

What it answers is fixed so that tests can assert whole values: the text reply is ``ANSWER``; a
request with ``tools`` and a ``tool_choice`` of ``any`` or ``tool`` gets a ``tool_use`` block of the
first tool with ``TOOL_INPUT``; the model ``claude-overloaded`` gets a 529, ``claude-stream-error``
an ``error`` event after ``message_start``, and ``claude-gated`` a stream that waits after its first
event until the test sets ``gate``. Its token count is its own rule, :func:`input_tokens` (words
and punctuation of the countable fields' JSON), the same in ``count_tokens`` and ``usage``. With
``counts = False`` it has no ``count_tokens`` (404, as a server without that route answers).

Every request is recorded in ``seen``: ``(method, path with query, headers, body)``.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "claude-fake-1"
ANSWER = ["Paris", " is the", " capital."]  # the text reply's deltas
TOOL_INPUT = {"city": "Paris"}
TOOL_JSON = ['{"city"', ': "Par', 'is"}']  # TOOL_INPUT's partial_json deltas
# the top-level fields each endpoint takes (Anthropic's API reference); any other is a 400
CREATE_FIELDS = {"model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream", "temperature",
                 "top_k", "top_p", "tools", "tool_choice", "thinking", "service_tier", "container", "mcp_servers",
                 "output_config", "cache_control", "inference_geo", "speed", "context_management"}
COUNT_FIELDS = {"model", "messages", "system", "tools", "tool_choice", "thinking", "output_config", "cache_control",
                "speed", "mcp_servers", "context_management"}
TOKEN = re.compile(r"\w+|[^\w\s]")


def input_tokens(body: dict) -> int:
    """The fake's own count of a request's input: the words and punctuation of the compact JSON of its
    system prompt, tools and messages (nothing like any tokenizer edgewise has)."""
    counted = {k: body[k] for k in ("system", "tools", "messages") if k in body}
    return len(TOKEN.findall(json.dumps(counted, separators=(",", ":"), ensure_ascii=False)))


class Invalid(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def _check_content(where: str, content: Any) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list) or not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in content):
        raise Invalid(400, "invalid_request_error", f"{where}.content: Input should be a valid string or a list of blocks")


def check_request(body: Any, fields: set[str], *, needs_max_tokens: bool) -> None:
    """What the real API refuses with a 400 ``invalid_request_error``."""
    if not isinstance(body, dict):
        raise Invalid(400, "invalid_request_error", "the body must be a JSON object")
    extra = sorted(set(body) - fields)
    if extra:
        raise Invalid(400, "invalid_request_error", f"{extra[0]}: Extra inputs are not permitted")
    required = ["model", "messages"] + (["max_tokens"] if needs_max_tokens else [])
    missing = [k for k in required if k not in body]
    if missing:
        raise Invalid(400, "invalid_request_error", f"{missing[0]}: Field required")
    if needs_max_tokens and (not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1):
        raise Invalid(400, "invalid_request_error", "max_tokens: Input should be an integer greater than 0")
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise Invalid(400, "invalid_request_error", "messages: at least one message is required")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise Invalid(400, "invalid_request_error", f"messages.{i}.role: Input should be 'user' or 'assistant'")
        _check_content(f"messages.{i}", m.get("content"))
    system = body.get("system")
    if system is not None and not isinstance(system, str) and not (
            isinstance(system, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in system)):
        raise Invalid(400, "invalid_request_error", "system: Input should be a valid string or a list of text blocks")


def _wants_tool(body: dict) -> bool:
    last = body["messages"][-1].get("content")
    answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    return bool(body.get("tools")) and (body.get("tool_choice") or {}).get("type") in ("any", "tool") and not answered


def message(body: dict) -> dict:
    """The Message a non-streamed request gets."""
    tool = _wants_tool(body)
    content: list[dict] = [{"type": "text", "text": "".join(ANSWER)}]
    if tool:
        content = [{"type": "tool_use", "id": "toolu_fake1", "name": body["tools"][0]["name"], "input": TOOL_INPUT}]
    return {"id": "msg_fake1", "type": "message", "role": "assistant", "model": body["model"], "content": content,
            "stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": input_tokens(body), "output_tokens": 7, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}


def events(body: dict) -> list[dict]:
    """The events of a streamed request, in Anthropic's order."""
    tool = _wants_tool(body)
    start = {**message(body), "content": [], "stop_reason": None,
             "usage": {"input_tokens": input_tokens(body), "output_tokens": 1, "cache_creation_input_tokens": 0,
                       "cache_read_input_tokens": 0}}
    if tool:
        block = {"type": "tool_use", "id": "toolu_fake1", "name": body["tools"][0]["name"], "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in TOOL_JSON]
    else:
        block = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in ANSWER]
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "ping"},
        *({"type": "content_block_delta", "index": 0, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    ]


def sse(event: dict) -> bytes:
    """One event as the API writes it: its type as the event name, its JSON as the data."""
    return f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()


MODELS = [{"type": "model", "id": MODEL, "display_name": "Claude Fake 1", "created_at": "2025-01-01T00:00:00Z"}]


class FakeAnthropic(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *, counts: bool = True) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.counts = counts
        self.gate = threading.Event()  # claude-gated's stream waits on it after its first event
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL, as the anthropic client takes it (no ``/v1``)."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def requests(self, path: str) -> list[dict]:
        """The JSON bodies the fake received on ``path``, oldest first."""
        return [json.loads(body) for method, p, _, body in self.seen if method == "POST" and p.split("?")[0] == path]

    def __enter__(self) -> FakeAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.set()
        self.shutdown()
        self.server_close()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: FakeAnthropic

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _json(self, obj: object, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        for k, v in [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                     ("request-id", "req_fake1"), *headers]:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, kind: str, message: str) -> None:
        self._json({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake1"}, status)

    def _stream(self, items: list[dict], *, gated: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for i, event in enumerate(items):
            self.wfile.write(sse(event))
            self.wfile.flush()
            if gated and i == 0:
                self.server.gate.wait(30)

    def _credentials(self) -> None:
        if not self.headers.get("anthropic-version"):
            raise Invalid(400, "invalid_request_error", "anthropic-version: header is required")
        if not self.headers.get("x-api-key") and not self.headers.get("authorization"):
            raise Invalid(401, "authentication_error", "x-api-key header is required")

    def do_GET(self) -> None:  # noqa: N802
        self.server.seen.append(("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, b""))
        path = self.path.split("?")[0]
        try:
            self._credentials()
        except Invalid as e:
            self._error(e.status, e.kind, e.message)
            return
        if path == "/v1/models":
            self._json({"data": MODELS, "has_more": False, "first_id": MODEL, "last_id": MODEL})
        elif path == f"/v1/models/{MODEL}":
            self._json(MODELS[0])
        else:
            self._error(404, "not_found_error", f"Not found: {path}")

    def do_POST(self) -> None:  # noqa: N802
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.seen.append(("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw))
        path = self.path.split("?")[0]
        try:
            self._credentials()
            body = json.loads(raw)
            if path == "/v1/messages":
                self._create(body)
            elif path == "/v1/messages/count_tokens" and self.server.counts:
                check_request(body, COUNT_FIELDS, needs_max_tokens=False)
                self._json({"input_tokens": input_tokens(body)})
            else:
                self._error(404, "not_found_error", f"Not found: {path}")
        except Invalid as e:
            self._error(e.status, e.kind, e.message)
        except ValueError as e:
            self._error(400, "invalid_request_error", f"the body is not valid JSON: {e}")

    def _create(self, body: dict) -> None:
        check_request(body, CREATE_FIELDS, needs_max_tokens=True)
        if body["model"] == "claude-overloaded":
            raise Invalid(529, "overloaded_error", "Overloaded")
        if not body.get("stream"):
            self._json(message(body))
        elif body["model"] == "claude-stream-error":
            self._stream([events(body)[0], {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}])
        else:
            self._stream(events(body), gated=body["model"] == "claude-gated")


def start_proxy(tmp, anthropic_url: str, *extra: str, env: dict[str, str] | None = None):
    """``edgewise serve --upstream-anthropic URL`` (and ``extra`` flags) on a free loopback port:
    ``(process, base URL)``; stop it with :func:`tests.servers.stop`."""
    import sys

    from .servers import free_port, start

    port = free_port()
    cmd = [sys.executable, "-m", "edgewise", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--upstream-anthropic", anthropic_url, *extra]
    env = {"EDGEWISE_API_KEY": "", "EDGEWISE_UPSTREAM_API_KEY": "", "EDGEWISE_UPSTREAM_ANTHROPIC_API_KEY": "",
           **(env or {})}
    return start(cmd, f"http://127.0.0.1:{port}/healthz", tmp / f"edgewise-{port}.log", timeout=60, env=env), \
        f"http://127.0.0.1:{port}"
