"""``POST /v1/retrieve``: the hits of ``edgewise retrieve`` from the store ``edgewise serve --store`` names.

The store is opened once, when the app is built (:func:`open_configured`: a store that cannot be
opened stops the start with its one-line message); each request is
:func:`edgewise.index.search.retrieve` on it, run like every other ``/v1`` call
(:func:`edgewise.serve.api.routes.run`: in a worker thread, under the deadline, its embedding of the
question counted by :mod:`edgewise.serve.api.cost`). The reply is ``{"chunks": [...]}``, each hit as
the chunk ``edgewise retrieve`` packs (id, text, title, score, meta), so it can go to ``/v1/pack``
as it is. Without ``--store`` the endpoint answers 404 and names the flag.

>>> from fastapi.testclient import TestClient
>>> from edgewise.serve.app import create_app
>>> from edgewise.serve.config import ServeConfig
>>> with TestClient(create_app(ServeConfig(api_key=None))) as client:
...     r = client.post("/v1/retrieve", json={"question": "q"})
>>> r.status_code, r.json()["error"]["message"]
(404, 'this server has no store: start it with edgewise serve --store DIR (a store edgewise index wrote)')
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from ...errors import ConfigError, EdgewiseError, InputError
from ..config import ServeConfig
from ..errors import ApiError
from ..transport.limits import check_request
from .routes import StrictJSONRoute, run
from .schemas import RetrieveRequest, error_responses


def open_configured(config: ServeConfig) -> Any:
    """The store ``config.store`` names, opened (None without one); one line naming the flag if it cannot be."""
    if config.store is None:
        return None
    from ...index.lance import open_store

    try:
        return open_store(config.store)
    except EdgewiseError as exc:
        raise ConfigError(f"--store {config.store}: {' '.join(str(exc).split())}") from None


def check(body: RetrieveRequest, config: ServeConfig) -> None:
    """The request's own values, before any work: a question (within --max-chars), a ``top_n`` in
    [1, --max-chunks], a mode."""
    from ...checks import check_int
    from ...index.search import check_mode

    check_request(None, len(body.question), max_chunks=config.max_chunks, max_chars=config.max_chars)
    if not body.question.strip():
        raise InputError(f"question must be a non-empty string, but got {body.question!r}")
    check_int("top_n", body.top_n, minimum=1)
    if body.top_n > config.max_chunks:
        raise InputError(f"top_n must be <= {config.max_chunks} (--max-chunks), but got {body.top_n}")
    check_mode(body.mode)


def hits(store: Any, body: RetrieveRequest) -> dict[str, Any]:
    """``{"chunks": [...]}``: the hits of ``edgewise retrieve`` for the request, best first, as chunks."""
    from ...index.search import retrieve

    return {"chunks": [h.chunk() for h in retrieve(store, body.question, top_n=body.top_n, mode=body.mode)]}


def router() -> APIRouter:
    """``POST /v1/retrieve``."""
    r = APIRouter(prefix="/v1", route_class=StrictJSONRoute, tags=["edgewise"])

    @r.post("/retrieve", response_model=dict[str, list[dict[str, Any]]],
            responses=error_responses(400, 401, 404, 408, 413, 422, 503, 504),
            summary="Retrieve chunks for a question from the server's store")
    async def retrieve(request: Request, body: RetrieveRequest) -> Response:
        """`edgewise retrieve`'s hits as chunks (`--store` on the server): `{"chunks": [{id, text, title, score, meta}]}`."""
        state = request.app.state
        if state.store is None:
            raise ApiError(404, "not_found",
                           "this server has no store: start it with edgewise serve --store DIR (a store edgewise index wrote)")
        check(body, state.config)
        store = state.store
        return await run(request, lambda packer, req, assets: hits(store, req), body)

    return r
