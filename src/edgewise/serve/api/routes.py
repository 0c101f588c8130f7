"""The endpoints: ``/v1/*`` (API key when set), the probes and ``/metrics``.

Each ``/v1`` endpoint checks the request's size (chunks, characters) and estimates its model work
(:mod:`edgewise.serve.api.cost`) in the event loop, then runs its :mod:`edgewise.serve.api.work` function
in a worker thread (:mod:`edgewise.serve.api.admission`: refused over ``--max-model-texts``, else in
the small or the model lane, each a pool of ``--threads`` with at most ``--queue`` waiting) under
the per-request deadline, and serialises the reply there too. Threads, not processes: the work is
short (a pack of 200 chunks is about a millisecond of CPU), a process pool would pickle every
request and reply and hold a copy of each model per process, and the tokenizers and the ONNX
models release the GIL. Measured (``benchmarks/serve_pool.py``, ``docs/bench/serve-pool.txt``,
200 chunks, a shared 2-core machine): 9.5 ms a request in a thread, 11.5 ms through a process
pool, 7.4 ms inline (which blocks the loop); with 4 requests at once the loop's worst lag was
41 ms with threads and 14 ms with processes, short enough for probes and new connections. For more cores, run more uvicorn workers (``--workers``): the service keeps no state. A
request past its deadline gets a 504 at once; its model work stops at the next inference batch
(:mod:`edgewise.score.deadline`), other work finishes in the background, holding its place in
its lane, so the threads never grow past two lanes of ``--threads``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from starlette.responses import JSONResponse

from ...jsonin import bodies
from ..errors import ApiError
from ..transport.limits import check_request, check_unicode, count_chars
from . import codec, cost, work
from .metrics import SCOPE_KEY
from .schemas import (
    Health,
    HighlightRequest,
    HighlightResult,
    PackRequest,
    PackResult,
    PruneRequest,
    Ready,
    ScoreRequest,
    TokensRequest,
    TokensResult,
    VariantsRequest,
    error_responses,
)

JSON_TYPE = "application/json"
CHARS_KEY = "edgewise.chars"  # scope key: the text fields' characters, counted while orjson's parse was walked


class _NotJSON(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJSON(name)


class StrictJSONRequest(Request):
    """A request whose JSON body may not hold ``NaN`` or ``Infinity`` (Python's json accepts them;
    JSON does not, and a reply could not carry them back)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            fast = bodies.read(body)  # orjson, where it reads the same values (no lone surrogate gets past it)
            if fast is not None:
                self._json, self.scope[CHARS_KEY] = fast
                return self._json
            try:
                self._json = json.loads(body, parse_constant=_no_constant)
            except _NotJSON as exc:
                text = body.decode("utf-8", errors="replace")
                raise json.JSONDecodeError(f"{exc.args[0]} is not a JSON value", text, text.find(exc.args[0])) from None
            check_unicode(body, self._json)  # a lone surrogate: a 400, not a reply that cannot be encoded
        return self._json


class StrictJSONRoute(APIRoute):
    def get_route_handler(self) -> Callable[..., Any]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict


async def run(request: Request, fn: Callable[..., Any], body: Any) -> Response:
    """Check the request's size, run ``fn`` in a worker thread under the deadline, reply with JSON."""
    state = request.app.state
    config = state.config
    chunks = getattr(body, "chunks", None)
    chars = request.scope.get(CHARS_KEY)  # counted as the body was read, when orjson read it
    if chars is None:
        chars = count_chars([getattr(body, name, None) for name in bodies.TEXT_FIELDS])
    check_request(chunks, chars, max_chunks=config.max_chunks, max_chars=config.max_chars)
    info = request.scope.setdefault(SCOPE_KEY, {})
    info.update(chunks_in=len(chunks) if chunks is not None else None, chars=chars)

    fast = CHARS_KEY in request.scope  # orjson read the body: it may write the reply

    def call() -> tuple[bytes, dict[str, Any]]:
        result = fn(state.packer, body, state.assets)
        data = codec.write(result, fast=fast)
        return data, work.summary(result)

    try:  # by its model texts: refused over --max-model-texts, else in its lane (503 when full), under the deadline
        data, summary = await state.admission.run(call, config.timeout_s, cost.estimate(body, order=config.order))
    except TimeoutError:
        raise ApiError(504, "timeout", f"the request took longer than {config.timeout_s:g} s (--timeout)") from None
    info.update(summary)
    return Response(data, media_type=JSON_TYPE)


_ERRORS = error_responses(400, 401, 403, 408, 413, 422, 503, 504)


def api_router() -> APIRouter:
    """``/v1/*``: the library's calls and the registries' names."""
    r = APIRouter(prefix="/v1", route_class=StrictJSONRoute, tags=["edgewise"])

    @r.post("/pack", response_model=PackResult, responses=_ERRORS, summary="Pack chunks for a query into a prompt")
    async def pack(request: Request, body: PackRequest) -> Response:
        """The JSON `edgewise pack --format json` prints: the prompt, its chat messages and the debug info."""
        return await run(request, partial(work.pack, order=request.app.state.config.order), body)

    @r.post("/variants", response_model=dict[str, PackResult], responses=_ERRORS,
            summary="One prompt per position of a key chunk")
    async def variants(request: Request, body: VariantsRequest) -> Response:
        """`edgewise variants --format json`: the position-sensitivity test (layout `layered` by default)."""
        return await run(request, work.variants, body)

    @r.post("/score", response_model=list[dict[str, Any]], responses=_ERRORS, summary="Score chunks against a query")
    async def score(request: Request, body: ScoreRequest) -> Response:
        """`edgewise score`: each chunk with its score and its rank (1 = best)."""
        return await run(request, work.score, body)

    @r.post("/prune", response_model=list[dict[str, Any]], responses=_ERRORS,
            summary="Keep the sentences that help the query")
    async def prune(request: Request, body: PruneRequest) -> Response:
        """`edgewise prune`: each chunk with only its sentences that score at least the threshold."""
        return await run(request, work.prune, body)

    @r.post("/highlight", response_model=list[HighlightResult], responses=_ERRORS,
            summary="Mark the sentences that answer the query")
    async def highlight(request: Request, body: HighlightRequest) -> Response:
        """`edgewise highlight --format json`: the spans of each chunk (or of `text`) with their scores."""
        return await run(request, work.highlight, body)

    @r.post("/tokens", response_model=TokensResult, responses=_ERRORS, summary="Count or cut text with a tokenizer")
    async def tokens(request: Request, body: TokensRequest) -> Response:
        """The tokens of `text` under `tokenizer`, and with `max_tokens` the text cut to fit."""
        return await run(request, work.tokens, body)

    @r.get("/capabilities", response_model=dict[str, Any], responses=error_responses(401),
           summary="What this server can do")
    async def capabilities(request: Request) -> JSONResponse:
        """The registries' names (plugins included, with where each comes from), the models, the limits."""
        return JSONResponse(request.app.state.capabilities)

    return r


def probe_router() -> APIRouter:
    """``/healthz`` and ``/readyz``: no API key needed (load balancers and orchestrators call them)."""
    r = APIRouter(tags=["probes"])

    @r.get("/healthz", response_model=Health, summary="The process answers")
    async def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @r.get("/readyz", response_model=Ready, responses={503: {"model": Ready, "description": "models still loading"}},
           summary="The preloaded models are loaded")
    async def readyz(request: Request) -> JSONResponse:
        states = dict(request.app.state.preload)
        ready = all(s == "ready" for s in states.values())
        failed = any(s.startswith("failed") for s in states.values())
        status = "ready" if ready else "failed" if failed else "loading"
        packer = request.app.state.packer
        counter = getattr(packer.tokenizer(packer.options), "counter", None)  # what counts tokens now
        return JSONResponse({"status": status, "preload": states, "counter": counter},
                            status_code=200 if ready else 503)

    return r


def metrics_router() -> APIRouter:
    r = APIRouter(tags=["probes"])

    @r.get("/metrics", response_class=Response, responses={**error_responses(401), 200: {
        "content": {"text/plain": {"schema": {"type": "string"}}}, "description": "Prometheus text format"}},
        summary="Prometheus metrics")
    async def metrics(request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(request.app.state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return r
