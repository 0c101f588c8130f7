"""Request limits: body size (413) and body time (408) while it is read; chunks and characters (422);
header count (431); strings that are not valid Unicode (400).

:class:`BodyLimit` is a pure ASGI middleware. A ``Content-Length`` over the limit is refused before
a byte of the body is read; a body without one (chunked) or one that lies is counted as it arrives
and refused at the first message that passes the limit, so a huge body is never held whole. A body
that has not arrived within the request timeout is a 408 (a slow client cannot hold a worker).
The check raises :class:`~edgewise.serve.errors.ApiError` from ``receive``: FastAPI passes it on,
and the app's error handlers write the JSON body.

>>> count_chars({"query": "abc", "chunks": ["de", {"text": "f", "meta": {"k": ["gh"]}}]})
8
>>> check_request(["a", "b"], 5, max_chunks=1, max_chars=100)
Traceback (most recent call last):
...
edgewise.serve.errors.ApiError: 422: a request may carry at most 1 chunks (--max-chunks), but got 2
>>> check_unicode(b'{"q": "\\\\ud800"}', {"q": "\\ud800", "chunks": ["ok"]})
Traceback (most recent call last):
...
edgewise.serve.errors.ApiError: 400: strings in the body must be valid Unicode, but q holds a lone surrogate (U+D800) at character 0
"""

from __future__ import annotations

import re
from collections.abc import Sized
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...jsonin.bodies import lone_surrogate_at
from ..errors import ApiError, error_response


class BodyLimit:
    """Refuse a body larger than ``max_bytes`` (413) or slower than ``timeout_s`` (408)."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    def _too_large(self, size: int | str) -> ApiError:
        return ApiError(413, "body_too_large",
                        f"the request body may be at most {self.max_bytes} bytes (--max-body-bytes), but got {size}")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                size = -1
            if size < 0:
                await error_response(400, "bad_request", f"Content-Length must be a number, but got {declared!r}")(
                    scope, receive, send)
                return
            if size > self.max_bytes:
                await error_response(413, "body_too_large", self._too_large(size).message,
                                     {"Connection": "close"})(scope, receive, send)
                return
        seen, done = 0, False
        deadline = anyio.current_time() + self.timeout_s

        async def limited() -> Message:
            nonlocal seen, done
            if done:  # the body is in: later calls wait for a disconnect (a streamed reply), unlimited
                return await receive()
            message: Message | None = None
            with anyio.move_on_after(max(deadline - anyio.current_time(), 0)):
                message = await receive()
            if message is None:
                raise ApiError(408, "request_timeout",
                               f"the request body did not arrive within {self.timeout_s:g} s (--timeout); "
                               f"{seen} bytes came", {"Connection": "close"})
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise ApiError(413, "body_too_large", self._too_large(f"more ({seen} bytes so far)").message,
                                   {"Connection": "close"})
                done = not message.get("more_body", False)
            return message

        await self.app(scope, limited, send)


def count_chars(value: Any) -> int:
    """The characters of every string in ``value`` (a parsed JSON value), keys of objects excluded."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total


def check_request(chunks: Sized | None, chars: int, *, max_chunks: int, max_chars: int) -> None:
    """422 when a request carries more chunks or more characters of text than the server takes."""
    n = 0 if chunks is None else len(chunks)
    if n > max_chunks:
        raise ApiError(422, "too_many_chunks",
                       f"a request may carry at most {max_chunks} chunks (--max-chunks), but got {n}")
    if chars > max_chars:
        raise ApiError(422, "too_much_text",
                       f"a request may carry at most {max_chars} characters of text (--max-chars), but got {chars}")


# what a lone surrogate can come from in a JSON body: a \\uD800-\\uDFFF escape, or its UTF-8-like bytes
# (Python's json decodes bytes with "surrogatepass"); a valid pair matches too and is let through below
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\xed[\xa0-\xbf]")


def check_unicode(body: bytes, value: Any) -> None:
    """400 when a string of ``value`` (``body`` parsed) holds a lone surrogate: it is not Unicode
    text, no UTF-8 can carry it (the reply could not be written), and the CLI refuses it too. The
    proxy's bodies get the same rule and message (:mod:`edgewise.serve.proxy.readbody`). Fast: the raw
    body is searched first, the parsed value only when the body may hold one."""
    if _MAYBE_SURROGATE.search(body) is None:
        return
    found = lone_surrogate_at(value)
    if found is not None:
        path, at, char = found
        raise ApiError(400, "invalid_json", f"strings in the body must be valid Unicode, but {path} holds a lone "
                                            f"surrogate (U+{ord(char):04X}) at character {at}")


class HeaderLimit:
    """Refuse a request with more than ``max_headers`` header lines (431). Their bytes are bounded
    before the app runs, by the HTTP protocol (:mod:`edgewise.serve.transport.connections`)."""

    def __init__(self, app: ASGIApp, max_headers: int) -> None:
        self.app, self.max_headers = app, max_headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        n = len(scope.get("headers") or ()) if scope["type"] == "http" else 0
        if n > self.max_headers:
            await error_response(431, "headers_too_large", f"a request may carry at most {self.max_headers} "
                                 f"headers (--max-headers), but got {n}", {"Connection": "close"})(scope, receive, send)
            return
        await self.app(scope, receive, send)
