"""Warm-up: one request to each endpoint, through the whole app, before the server listens.

What a first request would otherwise pay once: FastAPI builds each route's validation state on the
first request that reaches it (about 10 ms a route, 20-40 ms on this 2-core machine for
``/v1/pack``), the worker pool starts its first thread, and the pack path runs for the first time
(the default tokenizer's and layout's first use), and the first full garbage collection walks every
object the start made (the warm-up collects once, then freezes them: :func:`gc.freeze`). The
app's lifespan calls :func:`run` after the
tokenizer is loaded and sped up, so uvicorn (and a Ray Serve replica) takes connections only once
it is done: no request, and no ``/readyz``, can come before it.

What the first client request still pays that a later one does not, measured through the socket
(``benchmarks/serve_first.py --stages``): no Python call and no import more, with h11 or httptools
(``tests/serve/test_serve_first_request.py`` counts them), but about 100 minor page faults
(~0.25 ms here) while the worker thread's heap first grows to a request's size (a larger warm-up
pack leaves them in place). The rest of its extra time is the pause before it: after an idle second
every step of a request runs slower, in a bare server too (BENCHMARKS.md, "The first request").

Each warm-up request is a real ASGI call of the app, with the API key when the server has one.
It is marked in its scope (:data:`WARM_UP_KEY`) so the access log and the metrics leave it out:
``edgewise_requests_total`` counts clients' requests only. ``/v1/prune`` and ``/v1/highlight`` are
warmed with the lexical sentence scorer, so no model is loaded for them (``--preload`` loads
models); the proxy's routes are not called (they would reach the upstream).
"""

from __future__ import annotations

import gc
import json
import logging
import time
from typing import Any

from .metrics import WARM_UP_KEY  # the scope key that keeps a warm-up request out of the log and metrics

log = logging.getLogger("edgewise.serve")

_CHUNKS = [{"id": "a", "text": "Paris is the capital of France.", "score": 1.0},
           {"id": "b", "text": "The Seine flows through Paris.", "score": 0.5}]
_QUERY = "What is the capital of France?"
_SENTENCES = ("Paris is the capital and most populous city of France, on the river Seine.",
              "The city has been one of the world's major centres of finance, diplomacy and the arts since the "
              "17th century.", "Its metropolitan area had about 13 million inhabitants in 2023.",
              "The river divides the city into the Right Bank to the north and the Left Bank to the south.",
              "Thirty-seven bridges cross it within the city limits, the oldest finished in 1607.",
              "Le Havre, at the mouth of the Seine, is the second busiest port of France.",
              "The Louvre received 8.7 million visitors in 2023, more than any other museum.",
              "Rail lines from every part of the country meet at its six main stations.")
# a pack the size of a real one: some chunks whole, one cut to fit, the rest dropped (the paths a
# tiny pack never takes: truncation, the drop reasons, the debug records of each)
_LARGE = [{"id": f"w{i}", "title": f"Paris ({i})", "score": 1.0 - i / 20,
           "text": " ".join(_SENTENCES[(i + j) % len(_SENTENCES)] for j in range(6))} for i in range(16)]
OK = (200,)
#: method, path, body, the statuses expected (/readyz: 503 while --preload models load)
CALLS: tuple[tuple[str, str, dict[str, Any] | None, tuple[int, ...]], ...] = (
    ("GET", "/healthz", None, OK),
    ("GET", "/readyz", None, (200, 503)),
    ("POST", "/v1/pack", {"query": _QUERY, "chunks": _CHUNKS}, OK),
    ("POST", "/v1/pack", {"query": _QUERY, "chunks": _LARGE, "options": {"budget": 700}}, OK),
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
    # what the start built lives as long as the process: out of the collector's way, so that no
    # request pays for a collection that walks it (the first full one after the start took ~1 ms
    # inside the second request here, and every later one would walk it again)
    gc.collect()
    gc.freeze()
    log.info("warm-up: %d requests through the app in %.0f ms", len(CALLS), (time.perf_counter() - start) * 1000)
    return statuses
