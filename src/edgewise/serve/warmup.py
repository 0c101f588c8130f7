"""Warm-up: one request to each endpoint, through the whole app, before the server listens.

What a first request would otherwise pay once: FastAPI builds each route's validation state on the
first request that reaches it (about 10 ms a route, 20-40 ms on this 2-core machine for
``/v1/pack``), the worker pool starts its first thread, and the pack path runs for the first time
(the default tokenizer's and layout's first use). The app's lifespan calls :func:`run` after the
tokenizer is loaded and sped up, so uvicorn (and a Ray Serve replica) takes connections only once
it is done: no request, and no ``/readyz``, can come before it.

Each warm-up request is a real ASGI call of the app, with the API key when the server has one.
It is marked in its scope (:data:`WARM_UP_KEY`) so the access log and the metrics leave it out:
``edgewise_requests_total`` counts clients' requests only. ``/v1/prune`` and ``/v1/highlight`` are
warmed with the lexical sentence scorer, so no model is loaded for them (``--preload`` loads
models); the proxy's routes are not called (they would reach the upstream).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from .metrics import WARM_UP_KEY  # the scope key that keeps a warm-up request out of the log and metrics

log = logging.getLogger("edgewise.serve")

_CHUNKS = [{"id": "a", "text": "Paris is the capital of France.", "score": 1.0},
           {"id": "b", "text": "The Seine flows through Paris.", "score": 0.5}]
_QUERY = "What is the capital of France?"
OK = (200,)
#: method, path, body, the statuses expected (/readyz: 503 while --preload models load)
CALLS: tuple[tuple[str, str, dict[str, Any] | None, tuple[int, ...]], ...] = (
    ("GET", "/healthz", None, OK),
    ("GET", "/readyz", None, (200, 503)),
    ("POST", "/v1/pack", {"query": _QUERY, "chunks": _CHUNKS}, OK),
    ("POST", "/v1/variants", {"query": _QUERY, "chunks": _CHUNKS, "key_id": "a"}, OK),
    ("POST", "/v1/score", {"query": _QUERY, "chunks": _CHUNKS}, OK),
    ("POST", "/v1/prune", {"query": _QUERY, "chunks": _CHUNKS, "scorer": "lexical"}, OK),
    ("POST", "/v1/highlight", {"query": _QUERY, "text": _CHUNKS[0]["text"], "scorer": "lexical"}, OK),
    ("POST", "/v1/tokens", {"text": _CHUNKS[0]["text"]}, OK),
    ("POST", "/v1/pack", {"query": _QUERY}, (422,)),  # no chunks: the validation error's path
    ("GET", "/v1/capabilities", None, OK),
    ("GET", "/metrics", None, OK),
)


async def call(app: Any, method: str, path: str, body: dict[str, Any] | None, api_key: str | None) -> int:
    """One request through ``app`` (ASGI, in-process), marked as a warm-up; its status."""
    data = b"" if body is None else json.dumps(body).encode()
    headers = [(b"host", b"warm-up"), (b"content-length", str(len(data)).encode())]
    if body is not None:
        headers.append((b"content-type", b"application/json"))
    if api_key:
        headers.append((b"authorization", f"Bearer {api_key}".encode()))
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "headers": headers, "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 0),
             "state": {}, WARM_UP_KEY: True}
    pending = [{"type": "http.request", "body": data, "more_body": False}]
    status = [0]

    async def receive() -> dict[str, Any]:
        return pending.pop() if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status[0] = message["status"]

    await app(scope, receive, send)
    return status[0]


async def run(app: Any) -> list[int]:
    """Send :data:`CALLS` through ``app``; their statuses (0: the call raised). A call that fails or
    answers otherwise than expected is logged, not raised: the server still starts, and that
    endpoint's first client gets the same answer."""
    api_key = app.state.config.api_key
    start = time.perf_counter()
    statuses = []
    for method, path, body, expected in CALLS:
        try:
            status = await call(app, method, path, body, api_key)
        except Exception as exc:  # noqa: BLE001 - logged; the start goes on
            log.warning("warm-up %s %s failed: %s: %s", method, path, type(exc).__name__, exc)
            status = 0
        else:
            if status not in expected:
                log.warning("warm-up %s %s answered %d, not %s", method, path, status,
                            " or ".join(map(str, expected)))
        statuses.append(status)
    log.info("warm-up: %d requests through the app in %.0f ms", len(CALLS), (time.perf_counter() - start) * 1000)
    return statuses
