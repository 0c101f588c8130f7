"""The OpenAI-compatible proxy: one base URL for an OpenAI client, documents packed on the way.

Two routes pack: ``POST /v1/chat/completions`` (:mod:`edgewise.serve.proxy.conversation`) and
``POST /v1/responses`` (:mod:`edgewise.serve.proxy.openai_responses`); with an Anthropic upstream,
``/v1/messages`` too (:mod:`edgewise.serve.proxy.anthropic_routes`, on the same :class:`Upstream`
machinery). Their body is read (strict JSON,
:mod:`edgewise.serve.proxy.readbody`: a body that cannot be read is a 400, never forwarded on a guess);
one without documents is forwarded byte for byte, one with them is packed (in a worker thread:
packing is CPU work), the ``edgewise`` field removed, and forwarded, every number it did not
change spelled as it came (:mod:`edgewise.serve.proxy.rawjson`). Every other ``/v1/*`` path
(``/v1/models``, ``/v1/embeddings``, ``/v1/completions``, files...) is forwarded unchanged
(:mod:`edgewise.serve.proxy.passthrough`). All of them answer behind the same key, body limit and
metrics, with the same upstream timeout.

The upstream's answer comes back as it sent it: its status, headers (``Retry-After``, rate-limit
headers...) and body, relayed in pieces as they arrive (an event stream or a 100 MB file alike: the
proxy holds one piece at a time). Only a reply it must rewrite is read whole: a JSON reply to a
packed request with ``debug: true`` gets the debug info added, up to :data:`MAX_REWRITE_BYTES`
(past that it is relayed unchanged and ``x-edgewise-debug-body`` says why). The packing summary
rides in ``x-edgewise-*`` headers.

Upstream failures: refused or unreachable → 502; no answer within ``upstream_timeout_s`` → 504;
both ``{"error": {"type", "message"}}``. A connect error is retried (twice, 0.1 s then 0.3 s apart):
nothing was sent. Nothing else is retried: once the request went out it may have been served (and
billed), and once a reply began its bytes are the client's. A client that goes away mid-reply
closes the upstream response at once, and one that leaves before the answer cancels the upstream
call. ``docs/proxy.md`` is the guide.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import Response

from ...errors import EdgewiseError
from ..api.cost import FREE, Cost, pack_cost
from ..errors import error_response
from .conversation import extract, prepare
from .disconnect import unless_gone
from .openai_responses import prepare_response
from .rawjson import dumps
from .readbody import read_json

log = logging.getLogger("edgewise.serve.proxy")

RETRY_DELAYS = (0.1, 0.3)  # connect errors only
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "proxy-connection"})
REQUEST_DROPPED = HOP_BY_HOP | {"host", "content-length", "accept-encoding"}  # httpx writes its own
REPLY_DROPPED = HOP_BY_HOP | {"date", "server"}  # uvicorn writes its own; the body's length and encoding are relayed
MAX_REWRITE_BYTES = 8 * 1024 * 1024  # a debug reply is read whole up to this; past it, relayed unchanged
UPSTREAM_KEY_ENV = "EDGEWISE_UPSTREAM_API_KEY"


def proxy_cost(body: Mapping[str, Any], order: str | None = None) -> Cost:
    """The model texts of a proxied request: its documents packed under its ``edgewise`` options,
    for the request's own ``model`` (whose profile ``order="auto"`` may prune by). A body whose
    documents cannot be read counts nothing here; the packing refuses it."""
    try:
        opts = extract(body)[0]
    except EdgewiseError:
        return FREE
    if opts is None:
        return FREE
    model = body.get("model") if isinstance(body.get("model"), str) else None
    return pack_cost(opts["documents"], {**opts, "model": model}, order)


class Upstream:
    """One upstream and its pooled ``httpx.AsyncClient`` (opened with the app, closed with it)."""

    def __init__(self, config: Any, base: str | None = None, key_env: str = UPSTREAM_KEY_ENV) -> None:
        self.config = config
        self.base = (base or config.upstream).rstrip("/")
        self.key = os.environ.get(key_env) or None
        self.client: Any = None
        self.open_streams: Any = None  # a Gauge on the app's metrics registry, when it has one

    @asynccontextmanager
    async def lifespan(self, app: Any):  # noqa: ANN201
        import httpx

        if self.config.models_file is not None:  # the names the proxy sizes conversations by (idempotent)
            from ...catalog import load_models

            load_models(self.config.models_file)
        metrics = getattr(app.state, "metrics", None)
        if metrics is not None and self.open_streams is None:  # one gauge for every upstream of the app
            self.open_streams = getattr(app.state, "proxy_open_streams", None)
            if self.open_streams is None:
                from prometheus_client import Gauge

                self.open_streams = Gauge("edgewise_proxy_open_streams", "upstream event streams being relayed now",
                                          registry=metrics.registry, multiprocess_mode="livesum")
                app.state.proxy_open_streams = self.open_streams
        import socket

        # TCP_NODELAY: a request and a reply go out in several writes; with Nagle's algorithm on, a
        # write waits for the ACK of the one before (the same delay edgewise.serve.transport.nodelay removes)
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=32)
        transport = httpx.AsyncHTTPTransport(limits=limits, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(self.config.upstream_timeout_s), transport=transport)
        try:
            yield
        finally:
            await self.client.aclose()

    # -- the packed routes ------------------------------------------------------------------------

    async def packed(self, request: Request, path: str, plan_of: Callable[..., Any]) -> Response:
        """Read the body, pack it when it carries documents, forward it, relay the answer."""
        raw = await request.body()
        body = read_json(raw)
        plan = await self._plan(request, body, plan_of) if isinstance(body, dict) else None
        content = raw if plan is None else dumps(plan.body).encode()  # every number as the client wrote it
        headers = self.headers(request, content_type=request.headers.get("content-type", "application/json"))
        got = await unless_gone(request, self.send(request, path, content, headers))
        if got is None:  # the client left before the upstream answered: the upstream call was cancelled
            return error_response(499, "client_closed_request", "the client closed the connection")
        upstream, failure = got
        if failure is not None:
            return failure
        extra = {} if plan is None else plan.headers()
        if plan is not None and plan.want_debug and upstream.status_code < 400 and _rewritable(upstream):
            return await self._debugged(request, upstream, extra, plan)
        return self.relay(upstream, extra)

    async def _plan(self, request: Request, body: dict[str, Any], plan_of: Callable[..., Any]) -> Any:
        keywords = self.plan_keywords(request)
        plan = await self.run_work(request, lambda: plan_of(body, **keywords), proxy_cost(body, self.config.order))
        self.note(request, plan)
        return plan

    def plan_keywords(self, request: Request) -> dict[str, Any]:
        """The server's settings a plan takes: the history share, the packer, the limits, the file rules."""
        from ..api.work import request_options
        from ..transport.limits import check_request, count_chars

        state, config = request.app.state, self.config
        return {"history_share": config.history_share, "packer": getattr(state, "packer", None),
                "check": lambda docs, opts: check_request(docs, count_chars(opts), max_chunks=config.max_chunks,
                                                          max_chars=config.max_chars),
                "resolve": lambda opts: request_options(opts, getattr(state, "assets", None), config.order)}

    async def run_work(self, request: Request, work: Callable[[], Any], cost: Cost) -> Any:
        """``work()`` as every endpoint's work: the same pool and queue (503 when full), 504 past the deadline."""
        from ..errors import ApiError

        timeout = self.config.timeout_s
        try:
            return await request.app.state.admission.run(work, timeout, cost)
        except TimeoutError:
            raise ApiError(504, "timeout", f"packing took longer than {timeout:g} s (--timeout)") from None
        except EdgewiseError:
            raise  # the app's handler: 422 with the rule and the value
        except RecursionError:
            raise ApiError(422, "invalid_input", "the request is too deeply nested to process") from None

    @staticmethod
    def note(request: Request, plan: Any) -> None:
        """The packing's numbers, for the metrics and the access log."""
        from ..api.metrics import SCOPE_KEY

        info = request.scope.get(SCOPE_KEY)
        if plan is not None and isinstance(info, dict):
            info.update(chunks_in=len(plan.packed.debug_info.chunks), dropped=plan.dropped_documents,
                        prompt_tokens=plan.prompt_tokens)

    async def _debugged(self, request: Request, upstream: Any, extra: dict[str, str], plan: Any) -> Response:
        """The JSON reply with the debug info added, when it is at most MAX_REWRITE_BYTES; else as sent."""
        omitted = {**extra, "x-edgewise-debug-body": f"omitted: the reply is over {MAX_REWRITE_BYTES} bytes"}
        length = upstream.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_REWRITE_BYTES:
            return self.relay(upstream, omitted)
        chunks = upstream.aiter_raw()
        got = await unless_gone(request, _read_upto(chunks, MAX_REWRITE_BYTES, self.config.upstream_timeout_s))
        data, whole, failure = got if got is not None else (b"", False, None)
        if got is not None and failure is None and not whole:  # too large to rewrite: relayed as sent, and said so
            return self.relay(upstream, omitted, prefix=data, chunks=chunks)
        with anyio.CancelScope(shield=True):
            await upstream.aclose()
        if got is None:
            return error_response(499, "client_closed_request", "the client closed the connection")
        if failure is not None:
            return failure
        from ..api.assets import relative

        debug = plan.debug()
        relative(debug["pack"], self.config.assets)  # asset files named as the client named them
        headers = [(k, v) for k, v in reply_headers(upstream, extra) if k not in (b"content-length", b"content-encoding")]
        response = Response(_with_debug(data, debug), upstream.status_code)
        response.raw_headers = [*headers, (b"content-length", str(len(response.body)).encode())]
        return response

    # -- talking to the upstream -------------------------------------------------------------------

    async def send(self, request: Request, path: str, content: Any, headers: list[tuple[str, str]]) -> tuple[Any, Response | None]:
        """``(upstream response with its body unread, None)`` or ``(None, the error to answer)``."""
        import httpx

        url = self.base + path + (f"?{request.url.query}" if request.url.query else "")
        req = self.client.build_request(request.method, url, content=content, headers=headers)
        for attempt in range(len(RETRY_DELAYS) + 1):
            try:
                return await self.client.send(req, stream=True), None
            except httpx.ConnectError as e:  # nothing was sent: safe to try again, unless a streamed body began
                if attempt == len(RETRY_DELAYS) or getattr(content, "started", False):
                    return None, _upstream_error(e, self.config.upstream_timeout_s, tries=attempt + 1)
                await anyio.sleep(RETRY_DELAYS[attempt])
            except httpx.HTTPError as e:
                return None, _upstream_error(e, self.config.upstream_timeout_s)
        raise AssertionError("unreachable")

    def headers(self, request: Request, *, content_type: str | None = None,
                keep_length: bool = False) -> list[tuple[str, str]]:
        """The client's headers less hop-by-hop ones; edgewise's own key never goes upstream."""
        drop = REQUEST_DROPPED | _connection_tokens(request.headers.get("connection"))
        if keep_length:  # a body streamed through: the upstream reads the length the client declared
            drop -= {"content-length"}
        if content_type is not None:
            drop |= {"content-type"}
        if self.config.api_key or self.key:  # the client's Authorization was edgewise's key, or is replaced
            drop |= {"authorization"}
        out = [(k, v) for k, v in request.headers.items() if k.lower() not in drop]
        if self.key:
            out.append(("authorization", f"Bearer {self.key}"))
        out.append(("accept-encoding", "identity"))  # bytes relayed as they come, never re-encoded
        if content_type is not None:
            out.append(("content-type", content_type))
        return out

    def relay(self, upstream: Any, extra: dict[str, str], *, prefix: bytes = b"",
              chunks: AsyncIterator[bytes] | None = None) -> Response:
        streams = upstream.headers.get("content-type", "").startswith("text/event-stream")
        return Relay(upstream, reply_headers(upstream, extra), self.open_streams if streams else None,
                     prefix=prefix, chunks=chunks)


async def _read_upto(chunks: AsyncIterator[bytes], limit: int, timeout: float) -> tuple[bytes, bool, Response | None]:
    """``(bytes read, whether that is the whole body, failure)``; stops once past ``limit`` bytes."""
    import httpx

    data = bytearray()
    try:
        async for chunk in chunks:
            data += chunk
            if len(data) > limit:
                return bytes(data), False, None
    except httpx.HTTPError as e:
        return b"", False, _upstream_error(e, timeout, after_headers=True)
    return bytes(data), True, None


def _connection_tokens(value: str | None) -> frozenset[str]:
    """The headers a ``Connection`` header names: hop-by-hop too (RFC 9110 section 7.6.1)."""
    return frozenset(t.strip().lower() for t in (value or "").split(",") if t.strip())


def reply_headers(upstream: Any, extra: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """The upstream's headers as ASGI pairs (repeated ones kept), less hop-by-hop ones, plus ``extra``."""
    drop = REPLY_DROPPED | _connection_tokens(upstream.headers.get("connection"))
    out = [(k.lower(), v) for k, v in upstream.headers.raw if k.lower().decode("latin-1") not in drop]
    return out + [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]


def _rewritable(upstream: Any) -> bool:
    """A JSON reply whose bytes are its text (not compressed)."""
    kind = upstream.headers.get("content-type", "")
    return "json" in kind and upstream.headers.get("content-encoding", "identity").lower() == "identity"


def _with_debug(data: bytes, debug: dict[str, Any]) -> bytes:
    """The upstream's JSON with the full debug info added as a top-level ``edgewise`` field."""
    try:
        obj = json.loads(data)
    except ValueError:
        return data
    if not isinstance(obj, dict):
        return data
    return json.dumps({**obj, "edgewise": debug}, ensure_ascii=False, default=repr).encode()


def _upstream_error(exc: Exception, timeout: float, *, after_headers: bool = False, tries: int = 1) -> Response:
    import httpx

    what = "while reading its answer" if after_headers else ""
    if isinstance(exc, httpx.TimeoutException):
        log.warning("upstream timeout (%s) %s", type(exc).__name__, what)
        return error_response(504, "upstream_timeout", f"the upstream did not answer within upstream_timeout_s={timeout:g} "
                                                       f"seconds ({type(exc).__name__}{', ' + what if what else ''})")
    kind = "could not be reached" if isinstance(exc, httpx.ConnectError) else "failed"
    log.warning("upstream %s: %s", kind, exc)
    tried = f"; tried {tries} times" if tries > 1 else ""
    return error_response(502, "upstream_unavailable", f"the upstream {kind} ({type(exc).__name__}: {exc}){tried}")


class Relay(Response):
    """An upstream reply relayed piece by piece as it arrives (``prefix``: bytes already read from
    ``chunks``). A client disconnect (or any end) closes the upstream response at once, whatever
    the ASGI server's disconnect semantics; a reply that breaks is cut, never passed off as whole."""

    def __init__(self, upstream: Any, headers: list[tuple[bytes, bytes]], gauge: Any = None, *,
                 prefix: bytes = b"", chunks: AsyncIterator[bytes] | None = None) -> None:
        super().__init__(None, upstream.status_code)
        self.upstream, self.gauge, self.prefix = upstream, gauge, prefix
        self.chunks = chunks if chunks is not None else upstream.aiter_raw()
        self.body = b""
        self.raw_headers = headers

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.gauge is not None:
            self.gauge.inc()
        try:
            async with anyio.create_task_group() as group:
                async def relay() -> None:
                    try:
                        await self._relay(send)
                    finally:
                        group.cancel_scope.cancel()

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    log.info("client went away mid-reply: closing the upstream response")
                    group.cancel_scope.cancel()

                group.start_soon(relay)
                group.start_soon(watch)
        finally:
            with anyio.CancelScope(shield=True):
                await self.upstream.aclose()
            if self.gauge is not None:
                self.gauge.dec()

    async def _relay(self, send: Any) -> None:
        import httpx

        sent = 0
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            if self.prefix:
                await send({"type": "http.response.body", "body": self.prefix, "more_body": True})
                sent += len(self.prefix)
            async for chunk in self.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                sent += len(chunk)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except httpx.HTTPError as e:  # never passed off as a complete reply: the connection is cut
            log.warning("the upstream reply broke after %d bytes (%s: %s): cutting the client's connection",
                        sent, type(e).__name__, e)
        except OSError:
            log.info("client went away mid-reply: closing the upstream response")


def field_schema() -> dict[str, Any]:
    """The JSON Schema of a packed request's ``edgewise`` field: the documents, the proxy's own
    options, and every pack option a request may set (:func:`edgewise.serve.api.schemas.options_schema`,
    less ``model``: the request's own ``model`` names it). What ``/openapi.json`` shows.

    >>> schema = field_schema()
    >>> from .conversation import PACK_KEYS, PROXY_KEYS
    >>> set(schema["properties"]) <= {*PROXY_KEYS, *PACK_KEYS}, {"documents", "budget", "context_window"} <= set(schema["properties"])
    (True, True)
    """
    from ..api.schemas import CHUNK_SCHEMA, options_schema
    from .chatformat import CHAT_FORMATS
    from .conversation import DEFAULT_REPLY_TOKENS

    custom = {"type": "object", "required": ["per_message", "per_name", "reply"], "additionalProperties": False,
              "properties": {k: {"type": "integer", "minimum": 0} for k in ("per_message", "per_name", "reply")}}
    own: dict[str, Any] = {
        "documents": {"type": "array", "items": CHUNK_SCHEMA,
                      "description": "the documents to pack, as `edgewise pack` reads chunks"},
        "context_window": {"type": "integer", "minimum": 1, "description": "tokens of prompt and reply together "
                           "(default: the model's, from the registry)"},
        "chat_format": {"anyOf": [{"type": "string", "enum": list(CHAT_FORMATS)}, custom], "default": "openai",
                        "description": "the per-message cost rule"},
        "reply_tokens": {"type": "integer", "minimum": 0, "default": DEFAULT_REPLY_TOKENS, "description": "tokens "
                         "kept for the reply when the request sizes none (max_completion_tokens, max_tokens, "
                         "max_output_tokens)"},
        "history_share": {"type": "number", "minimum": 0, "maximum": 1, "description": "the share of the room "
                          "left that earlier turns may take (default: the server's --history-share)"},
        "debug": {"type": "boolean", "default": False, "description": "the full debug info, in the reply"},
    }
    pack = options_schema(exclude=("model",))["properties"]
    pack["budget"] = {**pack["budget"], "description": "a cap on the tokens the packed last message may take"}
    return {"type": "object", "required": ["documents"], "additionalProperties": False,
            "description": "documents and pack options; see docs/proxy.md", "properties": {**own, **pack}}


def packed_body() -> dict[str, Any]:
    """The OpenAPI request body of the packed routes: an object whose ``edgewise`` field is :func:`field_schema`."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "properties": {"edgewise": field_schema()}}}}}}


def passthrough_route(r: APIRouter, upstream: Upstream) -> None:
    """Every other ``/v1/*`` path, forwarded to ``upstream`` (:mod:`edgewise.serve.proxy.passthrough`)."""
    from .passthrough import METHODS, forward

    @r.api_route("/v1/{path:path}", methods=list(METHODS), include_in_schema=False)
    async def passthrough(request: Request) -> Response:
        return await forward(upstream, request)


def openai_routes(r: APIRouter, upstream: Upstream) -> None:
    """``POST /v1/chat/completions`` and ``POST /v1/responses``, packed, for ``upstream``."""
    body = packed_body()

    @r.post("/v1/chat/completions", summary="OpenAI chat completions, documents packed first",
            response_class=Response, openapi_extra=body)
    async def chat_completions(request: Request) -> Response:
        return await upstream.packed(request, "/chat/completions", prepare)

    @r.post("/v1/responses", summary="OpenAI Responses API, documents packed first",
            response_class=Response, openapi_extra=body)
    async def responses(request: Request) -> Response:
        return await upstream.packed(request, "/responses", prepare_response)
