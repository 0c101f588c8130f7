"""The OpenAI-compatible proxy: ``POST /v1/chat/completions`` packs documents, then forwards upstream.

A request without documents (no ``edgewise`` field, no message named ``edgewise_documents``) is
forwarded byte for byte. One with them is packed into its conversation
(:mod:`edgewise.serve.conversation`, in a worker thread: packing is CPU work), the ``edgewise``
field removed, and forwarded. The upstream's answer comes back as it sent it: its status, body
and headers (``Retry-After``, rate-limit headers...), a ``text/event-stream`` relayed chunk by chunk
as it arrives; the packing summary rides in ``x-edgewise-*`` headers.

Upstream failures: refused or unreachable → 502; no answer within ``upstream_timeout_s`` → 504;
both ``{"error": {"type", "message"}}``. A connect error is retried (twice, 0.1 s then 0.3 s apart):
nothing was sent. Nothing else is retried: once the request went out it may have been served (and
billed), and once a stream began its bytes are the client's. A client that goes away mid-stream
closes the upstream stream at once, and one that leaves before the answer cancels the upstream
call. ``docs/proxy.md`` is the guide.
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..errors import EdgewiseError
from .conversation import prepare
from .errors import error_response

log = logging.getLogger("edgewise.serve.proxy")

RETRY_DELAYS = (0.1, 0.3)  # connect errors only
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding",
                        "content-encoding", "date", "server"})
UPSTREAM_KEY_ENV = "EDGEWISE_UPSTREAM_API_KEY"


class Upstream:
    """One upstream and its pooled ``httpx.AsyncClient`` (opened with the app, closed with it)."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.base = config.upstream.rstrip("/")
        self.key = os.environ.get(UPSTREAM_KEY_ENV) or None
        self.client: Any = None
        self.open_streams: Any = None  # a Gauge on the app's metrics registry, when it has one

    @asynccontextmanager
    async def lifespan(self, app: Any):  # noqa: ANN201
        import httpx

        if self.config.models_file is not None:  # the names the proxy sizes conversations by (idempotent)
            from ..models import load_models

            load_models(self.config.models_file)
        metrics = getattr(app.state, "metrics", None)
        if metrics is not None and self.open_streams is None:
            from prometheus_client import Gauge

            self.open_streams = Gauge("edgewise_proxy_open_streams", "upstream event streams being relayed now",
                                      registry=metrics.registry, multiprocess_mode="livesum")
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(self.config.upstream_timeout_s),
                                        limits=httpx.Limits(max_connections=256, max_keepalive_connections=32))
        try:
            yield
        finally:
            await self.client.aclose()

    # -- the request ------------------------------------------------------------------------------

    async def chat(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None  # not ours to judge: forwarded as sent, the upstream answers it
        plan = None
        if isinstance(body, dict):
            plan = await self._plan(request, body)
        content = raw if plan is None else json.dumps(plan.body, ensure_ascii=False).encode()
        extra = {} if plan is None else plan.headers()
        got = await _unless_gone(request, self._call(request, "/chat/completions", content))
        if got is None:  # the client left before the upstream answered: the upstream call was cancelled
            return error_response(499, "client_closed_request", "the client closed the connection")
        upstream, failure, data = got
        if failure is not None:
            return failure
        headers = {**_pass_headers(upstream.headers), **extra}
        if data is None:
            return Relay(upstream, upstream.status_code, headers, self.open_streams)
        if plan is not None and plan.want_debug and upstream.status_code < 400:
            from .assets import relative

            debug = plan.debug()
            relative(debug["pack"], self.config.assets)  # asset files named as the client named them
            data = _with_debug(data, debug)
        return Response(data, upstream.status_code, headers)

    async def _call(self, request: Request, path: str, content: bytes) -> tuple[Any, Response | None, bytes | None]:
        """``(upstream response, failure, body)``: the body read whole unless it is an event stream to relay."""
        upstream, failure = await self._send(request, path, content)
        if failure is not None:
            return None, failure, None
        if upstream.headers.get("content-type", "").startswith("text/event-stream") and upstream.status_code < 400:
            return upstream, None, None
        try:
            return upstream, None, await upstream.aread()
        except Exception as e:  # noqa: BLE001 - httpx errors while reading the body
            return None, _upstream_error(e, self.config.upstream_timeout_s, after_headers=True), None
        finally:
            with anyio.CancelScope(shield=True):  # even when the client left: the connection is freed
                await upstream.aclose()

    async def _plan(self, request: Request, body: dict[str, Any]) -> Any:
        from .assets import resolve_options
        from .errors import ApiError
        from .limits import check_request, count_chars
        from .metrics import SCOPE_KEY

        state, config = request.app.state, self.config

        def work() -> Any:
            return prepare(body, history_share=config.history_share, packer=getattr(state, "packer", None),
                           check=lambda docs, opts: check_request(docs, count_chars(opts), max_chunks=config.max_chunks,
                                                                  max_chars=config.max_chars),
                           resolve=lambda opts: resolve_options(opts, config.assets))

        try:
            with anyio.fail_after(config.timeout_s):  # packing, as every endpoint's work: 504 past the deadline
                plan = await anyio.to_thread.run_sync(work, abandon_on_cancel=True, limiter=getattr(state, "limiter", None))
        except TimeoutError:
            raise ApiError(504, "timeout", f"packing took longer than {config.timeout_s:g} s (--timeout)") from None
        except EdgewiseError:
            raise  # the app's handler: 422 with the rule and the value
        except RecursionError:
            raise ApiError(422, "invalid_input", "the request is too deeply nested to process") from None
        info = request.scope.get(SCOPE_KEY)
        if plan is not None and isinstance(info, dict):  # for the metrics and the access log
            info.update(chunks_in=len(plan.packed.debug_info.chunks), dropped=plan.dropped_documents,
                        prompt_tokens=plan.prompt_tokens)
        return plan

    async def _send(self, request: Request, path: str, content: bytes) -> tuple[Any, Response | None]:
        import httpx

        url = self.base + path + (f"?{request.url.query}" if request.url.query else "")
        req = self.client.build_request("POST", url, content=content, headers=self._headers(request))
        for attempt in range(len(RETRY_DELAYS) + 1):
            try:
                return await self.client.send(req, stream=True), None
            except httpx.ConnectError as e:  # nothing was sent: safe to try again
                if attempt == len(RETRY_DELAYS):
                    return None, _upstream_error(e, self.config.upstream_timeout_s)
                await anyio.sleep(RETRY_DELAYS[attempt])
            except httpx.HTTPError as e:
                return None, _upstream_error(e, self.config.upstream_timeout_s)
        raise AssertionError("unreachable")

    def _headers(self, request: Request) -> dict[str, str]:
        """The client's headers less hop-by-hop ones; edgewise's own key never goes upstream."""
        out = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        if self.config.api_key:  # the client's Authorization was edgewise's key
            out.pop("authorization", None)
        if self.key:
            out["authorization"] = f"Bearer {self.key}"
        out["accept-encoding"] = "identity"  # bytes relayed as they come, never re-encoded
        out["content-type"] = request.headers.get("content-type", "application/json")
        return out


async def _unless_gone(request: Request, call: Any) -> Any:
    """Await ``call`` unless the client disconnects first (then cancel it: its upstream connection
    closes, and ``None`` is returned). The request body has been read, so the next message the
    server can send is the disconnect."""
    result: list[Any] = []
    async with anyio.create_task_group() as group:
        async def run() -> None:
            result.append(await call)
            group.cancel_scope.cancel()

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            log.info("client went away before the upstream answered: cancelling the upstream call")
            group.cancel_scope.cancel()

        group.start_soon(run)
        group.start_soon(watch)
    return result[0] if result else None


def _pass_headers(headers: Any) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}


def _with_debug(data: bytes, debug: dict[str, Any]) -> bytes:
    """The upstream's JSON with the full debug info added as a top-level ``edgewise`` field."""
    try:
        obj = json.loads(data)
    except ValueError:
        return data
    if not isinstance(obj, dict):
        return data
    return json.dumps({**obj, "edgewise": debug}, ensure_ascii=False).encode()


def _upstream_error(exc: Exception, timeout: float, *, after_headers: bool = False) -> Response:
    import httpx

    what = "while reading its answer" if after_headers else ""
    if isinstance(exc, httpx.TimeoutException):
        log.warning("upstream timeout (%s) %s", type(exc).__name__, what)
        return error_response(504, "upstream_timeout", f"the upstream did not answer within upstream_timeout_s={timeout:g} "
                                                       f"seconds ({type(exc).__name__}{', ' + what if what else ''})")
    kind = "could not be reached" if isinstance(exc, httpx.ConnectError) else "failed"
    log.warning("upstream %s: %s", kind, exc)
    return error_response(502, "upstream_unavailable", f"the upstream {kind} ({type(exc).__name__}: {exc})"
                                                       f"{'; tried ' + str(len(RETRY_DELAYS) + 1) + ' times' if isinstance(exc, httpx.ConnectError) else ''}")


class Relay(Response):
    """An upstream ``text/event-stream`` relayed chunk by chunk; a client disconnect (or any end)
    closes the upstream response at once, whatever the ASGI server's disconnect semantics."""

    def __init__(self, upstream: Any, status: int, headers: dict[str, str], gauge: Any = None) -> None:
        super().__init__(None, status, headers)
        self.upstream, self.gauge = upstream, gauge
        self.body = b""
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import httpx

        if self.gauge is not None:
            self.gauge.inc()
        try:
            async with anyio.create_task_group() as group:
                async def relay() -> None:
                    sent = 0
                    try:
                        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
                        async for chunk in self.upstream.aiter_raw():
                            await send({"type": "http.response.body", "body": chunk, "more_body": True})
                            sent += len(chunk)
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
                    except httpx.HTTPError as e:  # never passed off as a complete stream: the connection is cut
                        log.warning("the upstream stream broke after %d bytes (%s: %s): cutting the client's "
                                    "connection", sent, type(e).__name__, e)
                    except OSError:
                        log.info("client went away mid-stream: closing the upstream stream")
                    finally:
                        group.cancel_scope.cancel()

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    log.info("client went away mid-stream: closing the upstream stream")
                    group.cancel_scope.cancel()

                group.start_soon(relay)
                group.start_soon(watch)
        finally:
            with anyio.CancelScope(shield=True):
                await self.upstream.aclose()
            if self.gauge is not None:
                self.gauge.dec()


def router(config: Any) -> APIRouter:
    """The proxy's routes for ``config.upstream``; the app adds auth, limits and error mapping."""
    if not config.upstream:
        raise ValueError("the proxy needs config.upstream")
    upstream = Upstream(config)
    r = APIRouter(lifespan=upstream.lifespan, tags=["proxy"])

    @r.post("/v1/chat/completions", summary="OpenAI chat completions, documents packed first",
            response_class=Response, openapi_extra={"requestBody": {"required": True, "content": {
                "application/json": {"schema": {"type": "object", "properties": {
                    "messages": {"type": "array", "items": {"type": "object"}},
                    "edgewise": {"type": "object", "description": "documents and pack options; see docs/proxy.md"}},
                    "required": ["messages"]}}}}})
    async def chat_completions(request: Request) -> Response:
        return await upstream.chat(request)

    return r
