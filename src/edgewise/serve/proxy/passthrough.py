"""Every ``/v1/*`` path the proxy does not pack, forwarded to the upstream unchanged.

``{method} /v1/{path}?{query}`` goes to ``{upstream}/{path}?{query}`` with the client's body and
headers (less hop-by-hop ones; ``Authorization`` as for the packed routes), and the answer comes
back as the upstream sent it, relayed in pieces (:class:`edgewise.serve.proxy.routes.Relay`). So an
OpenAI client given edgewise as its base URL can list models, embed, complete, upload files...
through it. The app's layers apply as on every route: the API key, the body limit, the metrics,
and the upstream timeout.

Two things are not forwarded:

- the ``edgewise`` field: only ``POST /v1/chat/completions`` and ``POST /v1/responses`` read it, and
  a JSON body elsewhere that carries it is a 422 (its documents would reach the upstream unpacked).
  A JSON body is read to check it only when it could hold the key (it names it, or has ``\\u``
  escapes); then it must be readable, or it is a 400. Other bodies (multipart uploads, audio...)
  are streamed through as they arrive, never held whole;
- paths with ``.`` or ``..`` segments (they would leave the upstream's base path: 400), and
  edgewise's own paths (``/v1/pack``...) with a method they do not take (405).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import anyio
from fastapi import Request
from fastapi.responses import Response

from ..errors import ApiError, error_response
from .disconnect import unless_gone
from .readbody import refuse_field

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
PREFIX = "/v1"


class BodyStream:
    """The client's request body as an async iterable for httpx, read as the upstream takes it.
    ``started``: a piece was pulled (a connect error can no longer be retried); ``done``: set at the end."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.started = False
        self.done = anyio.Event()

    async def __aiter__(self) -> Any:
        self.started = True
        async for chunk in self.request.stream():
            if chunk:
                yield chunk
        self.done.set()  # only once the body is whole: a body cut short (past the limit) is the send's error


def upstream_path(request: Request) -> str:
    """The path after ``/v1`` as the client sent it (percent escapes kept), checked."""
    raw = request.scope.get("raw_path") or request.url.path.encode("utf-8")
    path = raw.decode("latin-1").removeprefix(PREFIX)
    if not path.startswith("/"):
        path = "/" + path
    segments = unquote(path).split("/")
    if "." in segments or ".." in segments:
        raise ApiError(400, "bad_request", f"a forwarded path may not hold '.' or '..' segments (they would leave the "
                                           f"upstream's base URL), but got {request.url.path!r}")
    return path


def _own_methods(request: Request) -> set[str] | None:
    """The methods of edgewise's own route at this path (``/v1/pack``...), None when it has none
    (read from the app's OpenAPI schema, which lists every route but the forwarded ones)."""
    operations = request.app.openapi().get("paths", {}).get(request.url.path.rstrip("/"))
    if not operations or any("proxy" in (op.get("tags") or []) for op in operations.values()):
        return None
    return {method.upper() for method in operations}


async def forward(upstream: Any, request: Request) -> Response:
    """Forward the request as it came; relay the answer as it comes."""
    own = _own_methods(request)
    if own is not None:
        allowed = ", ".join(sorted(own))
        return error_response(405, "method_not_allowed", f"{request.url.path} is edgewise's own and takes {allowed}, "
                                                         f"but got {request.method}", {"Allow": allowed})
    path = upstream_path(request)
    kind = request.headers.get("content-type")
    if kind is None or "json" in kind.lower():  # read whole (within the body limit): it may carry the field
        raw = await request.body()
        refuse_field(raw, request.method, request.url.path)
        content: Any = raw
        headers = upstream.headers(request)
        gate = None
    else:
        content = BodyStream(request)
        headers = upstream.headers(request, keep_length=True)
        gate = content.done
    got = await unless_gone(request, upstream.send(request, path, content, headers), after=gate)
    if got is None:
        return error_response(499, "client_closed_request", "the client closed the connection")
    reply, failure = got
    return failure if failure is not None else upstream.relay(reply, {})
