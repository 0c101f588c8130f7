"""Every error the service returns is JSON ``{"error": {"type", "message"}}`` with a 4xx status.

Every error edgewise itself writes has a ``type`` that starts with ``edgewise_`` and an
``x-edgewise-error: 1`` header, so a client (LiteLLM, an OpenAI SDK) behind the proxy can tell
it from an error the upstream model sent (those are relayed as they came, without the header).

The mapping is made once, here: edgewise's own exceptions (their messages name the rule and the
value) are 422, a malformed JSON body is 400, a body too large 413, one too slow 408, work past
its deadline 504, a full queue 503, a missing or wrong API key 401, a path outside the assets
directory 403. Headers too large (431) and requests the HTTP parser refuses (400) are written by
the protocol (:mod:`edgewise.serve.transport.connections`) with the same body. Only a
bug gives a 500, and its message says nothing of the server's internals (the traceback is logged).
Paths inside the assets directory appear relative to it, as the client named them.

>>> r = error_response(422, "invalid_input", "top_k must be > 0, but got 0")
>>> r.body, r.headers[ERROR_HEADER]
(b'{"error":{"type":"edgewise_invalid_input","message":"top_k must be > 0, but got 0"}}', '1')
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ..errors import BudgetError, ConfigError, EdgewiseError, InputError

log = logging.getLogger("edgewise.serve")

PREFIX = "edgewise_"  # every type of an error edgewise writes starts with it
ERROR_HEADER = "x-edgewise-error"  # "1" on every error edgewise writes, absent from relayed ones

_STATUS_TYPES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                 405: "method_not_allowed", 408: "request_timeout", 413: "body_too_large",
                 415: "unsupported_media_type", 422: "invalid_input", 504: "timeout"}


class ApiError(HTTPException):
    """An error with its HTTP status, a short machine-readable ``type`` and a message for people.

    An ``HTTPException``, so FastAPI passes it through when it is raised while the body is read.
    """

    def __init__(self, status: int, type: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(status, message, headers)
        self.type = type
        self.message = message


def error_type(type: str) -> str:
    """The ``type`` a client sees: ``edgewise_`` and the short name (``invalid_input``...)."""
    return type if type.startswith(PREFIX) else PREFIX + type


def error_body(type: str, message: str) -> bytes:
    """The JSON bytes of an error body (also written by the HTTP protocol, before any app runs)."""
    return json.dumps({"error": {"type": error_type(type), "message": message}}, ensure_ascii=False,
                      separators=(",", ":")).encode()


def error_response(status: int, type: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON body every error has: ``{"error": {"type": "edgewise_...", "message": ...}}``."""
    return JSONResponse({"error": {"type": error_type(type), "message": message}}, status_code=status,
                        headers={**(headers or {}), ERROR_HEADER: "1"})


def edgewise_status(exc: EdgewiseError) -> tuple[int, str]:
    """Status and type for one of edgewise's exceptions."""
    if isinstance(exc, BudgetError):
        return 422, "budget_error"
    if isinstance(exc, ConfigError):
        return 422, "config_error"
    if isinstance(exc, InputError):
        return 422, "invalid_input"
    return 422, "edgewise_error"


def validation_message(errors: list[dict[str, Any]]) -> tuple[int, str, str]:
    """Status, type and a one-line message for FastAPI's validation errors (the first one)."""
    first = errors[0] if errors else {"msg": "invalid request", "loc": ()}
    if first.get("type") == "json_invalid":
        detail = (first.get("ctx") or {}).get("error") or "not valid JSON"
        return 400, "invalid_json", f"the body must be valid JSON, but {detail} at offset {first['loc'][-1]}"
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    got = first.get("input")
    shown = "" if first.get("type") == "missing" else f", but got {_short(got)}"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return 422, "invalid_request", f"{where}: {first.get('msg', 'invalid')}{shown}{more}"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def install(app: FastAPI, *, hide: str | None = None) -> None:
    """Map every exception to the JSON error body; ``hide``: a path prefix (the assets directory)
    taken out of messages, so they name files as the client did."""

    def clean(message: str) -> str:
        if not hide:
            return message
        return message.replace(hide, "").replace(hide.rstrip("/"), ".")  # the directory itself: "."

    async def on_api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status_code, exc.type, clean(exc.message), exc.headers)

    async def on_http(request: Request, exc: HTTPException) -> JSONResponse:
        kind = _STATUS_TYPES.get(exc.status_code, "http_error")
        return error_response(exc.status_code, kind, clean(str(exc.detail)), getattr(exc, "headers", None))

    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, kind, message = validation_message(list(exc.errors()))
        return error_response(status, kind, message)

    async def on_edgewise(request: Request, exc: EdgewiseError) -> JSONResponse:
        status, kind = edgewise_status(exc)
        return error_response(status, kind, clean(" ".join(str(exc).split("\n"))))

    async def on_import(request: Request, exc: ImportError) -> JSONResponse:  # a missing extra on the server
        return error_response(422, "unavailable", f"not available on this server: {exc}")

    async def on_too_big(request: Request, exc: Exception) -> JSONResponse:
        return error_response(422, "invalid_input", "the input is too deeply nested or too large to process")

    async def on_bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(500, "internal_error", "the server failed on this request; the error is in its log")

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(HTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(EdgewiseError, on_edgewise)
    app.add_exception_handler(ImportError, on_import)
    app.add_exception_handler(RecursionError, on_too_big)
    app.add_exception_handler(MemoryError, on_too_big)
    app.add_exception_handler(Exception, on_bug)
