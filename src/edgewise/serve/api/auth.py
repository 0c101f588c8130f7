"""Optional bearer-token auth: ``Authorization: Bearer <key>`` when the server has an API key.

The key comes from ``EDGEWISE_API_KEY`` (or the variable ``--api-key-env`` names), never from a
flag (it would show in ``ps``). The comparison takes the same time whatever the guess
(:func:`hmac.compare_digest`). Without a key, every request is let through. The probes
(``/healthz``, ``/readyz``) never need it; ``/v1/*``, the proxy and ``/metrics`` do.
"""

from __future__ import annotations

import hmac

from fastapi import Request

from ..errors import ApiError

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="edgewise"'}


def check_key(expected: str | None, header: str | None) -> None:
    """Raise a 401 unless ``header`` is ``Bearer <expected>`` (nothing to check without a key).

    >>> check_key("s3cret", "Bearer s3cret")
    >>> check_key("s3cret", "Bearer guess")
    Traceback (most recent call last):
    ...
    edgewise.serve.errors.ApiError: 401: the API key is wrong
    """
    if not expected:
        return
    if not header:
        raise ApiError(401, "unauthorized", "this server needs an API key: send 'Authorization: Bearer <key>'", _CHALLENGE)
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "unauthorized", "the Authorization header must be 'Bearer <key>'", _CHALLENGE)
    if not hmac.compare_digest(token.strip().encode(), expected.encode()):
        raise ApiError(401, "unauthorized", "the API key is wrong", _CHALLENGE)


async def require_key(request: Request) -> None:
    """FastAPI dependency: the request must carry the server's API key (``app.state.config.api_key``)."""
    check_key(request.app.state.config.api_key, request.headers.get("authorization"))
