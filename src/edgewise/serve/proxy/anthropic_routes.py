"""Anthropic's Messages API behind the proxy (``--upstream-anthropic URL``): one base URL for the anthropic client.

``URL`` is the base URL the anthropic client takes (``https://api.anthropic.com``; a trailing
``/v1`` is the same). ``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` are packed
(:mod:`edgewise.serve.proxy.anthropic`) and forwarded to ``{URL}/v1/messages...``; every other
``/v1/*`` path is forwarded unchanged (:mod:`edgewise.serve.proxy.passthrough`). With an OpenAI
upstream as well (``--upstream``), a forwarded request goes to Anthropic's when it carries the
``anthropic-version`` header (every anthropic client sends it), else to OpenAI's.

Counting: before packing, the upstream counts the request less its documents, once
(``/v1/messages/count_tokens``, :meth:`AnthropicUpstream.count`); an upstream without that endpoint
(it answers 404, 405 or 501) is not asked again for :data:`RECHECK_S` seconds, and the
conversation is estimated meanwhile. ``x-edgewise-counter`` says which counted
(``count_tokens`` or ``estimate``), ``x-edgewise-counter-reason`` why there was no count.

Errors edgewise writes on these requests are in Anthropic's shape,
``{"type": "error", "error": {"type": "invalid_request_error", "message": ...}}``, with the status
and the ``x-edgewise-error: 1`` header of edgewise's other errors; the upstream's errors (statuses
and bodies) and its event streams are relayed as they come. The upstream's key, when the operator
sets one, is ``EDGEWISE_UPSTREAM_ANTHROPIC_API_KEY``, sent as ``x-api-key``.

>>> anthropic_type(422), anthropic_type(413), anthropic_type(502)
('invalid_request_error', 'request_too_large', 'api_error')
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute

from ..errors import ERROR_HEADER, ApiError
from .anthropic import Draft, draft
from .disconnect import unless_gone
from .rawjson import dumps
from .routes import Upstream

log = logging.getLogger("edgewise.serve.proxy")

KEY_ENV = "EDGEWISE_UPSTREAM_ANTHROPIC_API_KEY"
VERSION_HEADER = "anthropic-version"
RECHECK_S = 600.0  # an upstream without count_tokens is asked again after this long
NO_COUNT = (404, 405, 501)  # the answers that say the upstream has no count_tokens
# Anthropic's error types by status (its API reference, "Errors")
TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error", 403: "permission_error",
         404: "not_found_error", 408: "timeout_error", 413: "request_too_large", 429: "rate_limit_error",
         500: "api_error", 502: "api_error", 503: "overloaded_error", 504: "timeout_error", 529: "overloaded_error"}


def anthropic_type(status: int) -> str:
    """Anthropic's error type for an HTTP status (a 4xx it has no name for is an invalid request)."""
    return TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def anthropic_error(response: Response) -> Response:
    """An error edgewise wrote (``x-edgewise-error: 1``) in Anthropic's shape, same status and headers;
    any other response as it is."""
    if response.headers.get(ERROR_HEADER) != "1":
        return response
    try:
        message = json.loads(response.body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return response
    headers = {k: v for k, v in response.headers.items() if k not in ("content-length", "content-type")}
    body = {"type": "error", "error": {"type": anthropic_type(response.status_code), "message": message}}
    return JSONResponse(body, response.status_code, headers=headers)


async def _handled(request: Request, exc: Exception) -> Response:
    """The response the app's own handler writes for ``exc`` (the one mapping of errors to statuses)."""
    handlers = request.app.exception_handlers
    for kind in type(exc).__mro__:
        if kind in handlers:
            return await handlers[kind](request, exc)
    raise exc


def error_route(for_anthropic: Callable[[Request], bool]) -> type[APIRoute]:
    """A route class whose errors are in Anthropic's shape on the requests ``for_anthropic`` picks
    (raised ones included: the API key's 401, the body's 413 and 408, a 422 of the packing)."""

    class AnthropicErrors(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Any]:
            handle = super().get_route_handler()

            async def route(request: Request) -> Response:
                if not for_anthropic(request):
                    return await handle(request)
                try:
                    response = await handle(request)
                except Exception as exc:  # noqa: BLE001 - mapped by the app's handlers, then reshaped
                    response = await _handled(request, exc)
                return anthropic_error(response)

            return route

    return AnthropicErrors


class AnthropicUpstream(Upstream):
    """The Anthropic-compatible upstream: its base URL with ``/v1``, its key sent as ``x-api-key``,
    and its ``count_tokens`` asked once a packed request."""

    def __init__(self, config: Any) -> None:
        base = config.upstream_anthropic.rstrip("/").removesuffix("/v1") + "/v1"
        super().__init__(config, base=base, key_env=KEY_ENV)
        self.no_count: tuple[float, str] | None = None  # (when, why): the upstream had no count_tokens

    def headers(self, request: Request, *, content_type: str | None = None,
                keep_length: bool = False) -> list[tuple[str, str]]:
        out = super().headers(request, content_type=content_type, keep_length=keep_length)
        if self.key:  # the operator's key replaces the client's credentials
            out = [(k, v) for k, v in out if k.lower() not in ("authorization", "x-api-key")]
            out.append(("x-api-key", self.key))
        return out

    async def _plan(self, request: Request, body: dict[str, Any], plan_of: Callable[..., Any]) -> Any:
        """Draft (settings, turns kept), one count of the conversation, then the documents packed."""
        from ..api.cost import FREE, pack_cost

        keywords = self.plan_keywords(request)
        first: Draft | None = await self.run_work(request, lambda: plan_of(body, **keywords), FREE)
        if first is None:
            return None
        counted, reason = await self.count(request, first)
        s = first.settings
        cost = pack_cost(first.opts["documents"], {**first.opts, "model": s.model}, self.config.order)
        plan = await self.run_work(request, lambda: first.finish(counted, reason), cost)
        self.note(request, plan)
        return plan

    async def count(self, request: Request, planned: Draft) -> tuple[int | None, str | None]:
        """``(the upstream's count of the request less its documents, None)``, or ``(None, why not)``."""
        if self.no_count is not None:
            when, why = self.no_count
            if time.monotonic() - when < RECHECK_S:
                return None, why
            self.no_count = None
        content = dumps(planned.count_body()).encode()
        call = self._count(request, content)
        got = await unless_gone(request, call)
        if got is None:
            raise ApiError(499, "client_closed_request", "the client closed the connection")
        return got

    async def _count(self, request: Request, content: bytes) -> tuple[int | None, str | None]:
        import httpx

        headers = self.headers(request, content_type="application/json")
        try:
            reply = await self.client.post(self.base + "/messages/count_tokens", content=content, headers=headers)
        except httpx.HTTPError as e:
            log.warning("count_tokens failed (%s: %s): estimating", type(e).__name__, e)
            return None, f"count_tokens failed ({type(e).__name__})"
        if reply.status_code in NO_COUNT:
            why = f"the upstream has no /v1/messages/count_tokens (it answered {reply.status_code})"
            self.no_count = (time.monotonic(), why)
            return None, why
        if reply.status_code != 200:
            return None, f"count_tokens answered {reply.status_code}"
        try:
            tokens = reply.json()["input_tokens"]
        except (ValueError, KeyError, TypeError):
            tokens = None
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            return None, "count_tokens answered without a whole input_tokens"
        return tokens, None


def picks_anthropic(openai: Upstream | None) -> Callable[[Request], bool]:
    """Whether a forwarded request goes to the Anthropic upstream: always without an OpenAI one,
    else when it carries the ``anthropic-version`` header."""
    return lambda request: openai is None or VERSION_HEADER in request.headers


def add_routes(r: APIRouter, anthropic: AnthropicUpstream, openai: Upstream | None, body: dict[str, Any]) -> None:
    """``/v1/messages``, ``/v1/messages/count_tokens`` (``body``: their OpenAPI request body), and the
    passthrough of every other ``/v1/*`` path (to the upstream :func:`picks_anthropic` says); the app
    adds auth, limits and errors."""
    from .passthrough import METHODS, forward

    always = error_route(lambda request: True)

    async def messages(request: Request) -> Response:
        return await anthropic.packed(request, "/messages", draft)

    async def count_tokens(request: Request) -> Response:
        return await anthropic.packed(request, "/messages/count_tokens", draft)

    r.add_api_route("/v1/messages", messages, methods=["POST"], response_class=Response, openapi_extra=body,
                    summary="Anthropic Messages API, documents packed first", route_class_override=always)
    r.add_api_route("/v1/messages/count_tokens", count_tokens, methods=["POST"], response_class=Response,
                    openapi_extra=body, summary="Anthropic token count of a Messages request, documents packed first",
                    route_class_override=always)
    chosen = picks_anthropic(openai)

    async def passthrough(request: Request) -> Response:
        return await forward(anthropic if chosen(request) else openai, request)

    r.add_api_route("/v1/{path:path}", passthrough, methods=list(METHODS), include_in_schema=False,
                    route_class_override=error_route(chosen))
