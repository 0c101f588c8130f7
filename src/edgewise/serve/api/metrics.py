"""Prometheus metrics and the structured access log: one middleware that sees every request.

Metrics (``GET /metrics``, Prometheus text format, prometheus-client):

- ``edgewise_requests_total{method,route,status}``: requests by route template and status;
- ``edgewise_request_duration_seconds{route}``: latency histogram;
- ``edgewise_input_characters_total``: characters of text received (query and chunks): what went
  in. Input is measured in characters, not tokens: tokenizing every input chunk costs about 2.5x
  the pack itself at 200 chunks, which mostly never counts the chunks that cannot fit;
- ``edgewise_prompt_tokens_total``: tokens of the prompts returned, exact: what came out;
- ``edgewise_chunks_total{outcome}``: chunks received (``in``) and ``dropped``.

Each app has its own registry. With several workers (``--workers``), ``edgewise serve`` sets
``PROMETHEUS_MULTIPROC_DIR`` and ``/metrics`` adds up every worker's values.

The access log is one JSON line per request on the ``edgewise.serve.access`` logger: time,
method, path, status, duration in ms, chunks in, dropped, client address, worker pid; the body
only with ``--log-bodies``. The start's warm-up requests (:mod:`edgewise.serve.api.warmup`) are in
neither.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

access_log = logging.getLogger("edgewise.serve.access")
WARM_UP_KEY = "edgewise.warm_up"  # set on the requests of edgewise.serve.api.warmup: not logged, not counted
SCOPE_KEY = "edgewise"  # handlers leave what they know of a request (chunks in, dropped) in scope[SCOPE_KEY]
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
MAX_LOGGED_BODY = 64 * 1024


class Metrics:
    """The service's metrics, on a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("edgewise_requests", "HTTP requests by route and status", ["method", "route", "status"],
                                registry=r)
        self.latency = Histogram("edgewise_request_duration_seconds", "request latency", ["route"], buckets=BUCKETS,
                                 registry=r)
        self.chars_in = Counter("edgewise_input_characters", "characters of text received (query and chunks)",
                                registry=r)
        self.tokens_out = Counter("edgewise_prompt_tokens", "tokens of the prompts returned", registry=r)
        self.chunks = Counter("edgewise_chunks", "chunks received (in) and dropped", ["outcome"], registry=r)

    def exposition(self) -> bytes:
        """The text ``/metrics`` returns: this process's values, or every worker's in multiprocess mode."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            merged = CollectorRegistry()
            multiprocess.MultiProcessCollector(merged)
            return generate_latest(merged)
        return generate_latest(self.registry)

    def observe(self, method: str, route: str, status: int, seconds: float, info: dict[str, Any]) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(route).observe(seconds)
        if info.get("chars"):
            self.chars_in.inc(info["chars"])
        if info.get("prompt_tokens"):
            self.tokens_out.inc(info["prompt_tokens"])
        if info.get("chunks_in"):
            self.chunks.labels("in").inc(info["chunks_in"])
        if info.get("dropped"):
            self.chunks.labels("dropped").inc(info["dropped"])


class Observe:
    """ASGI middleware: time each request, count it, and write its access-log line."""

    def __init__(self, app: ASGIApp, metrics: Metrics, log_bodies: bool = False) -> None:
        self.app, self.metrics, self.log_bodies = app, metrics, log_bodies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get(WARM_UP_KEY):  # a warm-up request is no client's
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        info: dict[str, Any] = {}
        scope[SCOPE_KEY] = info
        status = 500  # unless a response starts
        body = bytearray()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        async def receiving() -> Message:
            message = await receive()
            if message["type"] == "http.request" and len(body) < MAX_LOGGED_BODY:
                body.extend(message.get("body", b"")[: MAX_LOGGED_BODY - len(body)])
            return message

        try:
            await self.app(scope, receiving if self.log_bodies else receive, sending)
        finally:
            seconds = time.perf_counter() - start
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.observe(scope["method"], template, status, seconds, info)
            line = {"ts": round(time.time(), 3), "method": scope["method"], "path": scope["path"], "status": status,
                    "duration_ms": round(seconds * 1000, 3), "chunks_in": info.get("chunks_in"),
                    "dropped": info.get("dropped"), "client": (scope.get("client") or [None])[0], "pid": os.getpid()}
            if self.log_bodies:
                line["body"] = body.decode("utf-8", errors="replace")
            access_log.info(json.dumps(line, ensure_ascii=False))
