"""``create_app(config)``: the FastAPI app of ``edgewise serve``.

One process holds one long-lived :class:`~edgewise.packing.packer.Packer` (the shared default one, which
:func:`edgewise.variants` packs with too), so tokenizers, scorers and their caches load once.
``--preload`` scorers are resolved when the app starts (a bad name stops the start) and their
models loaded in a background thread; ``/readyz`` answers 503 until they are in. The layers, from
the outside in: access log and metrics, CORS (only with ``--cors-origin``), the header count and
body limits, the error handlers, then the routes (``/v1/*`` and ``/metrics`` behind the API key when one is set;
``/ui``, the inspector page, calls them with the key typed into it).
With ``config.upstream`` or ``config.upstream_anthropic`` the proxy's routes (:mod:`edgewise.serve.proxy`)
join, behind the same key, limit and error format.

>>> from fastapi.testclient import TestClient
>>> with TestClient(create_app(ServeConfig(api_key=None))) as client:
...     client.post("/v1/tokens", json={"text": "hello world", "tokenizer": "words"}).json()
{'tokenizer': 'words', 'estimated': True, 'tokens': 3}
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.openapi.utils import get_openapi

from .. import __version__
from ..errors import ConfigError
from ..options import PackOptions
from ..packing.packer import default_packer
from . import errors
from .api import retrieval, routes, ui, warmup
from .api.admission import Admission
from .api.assets import Assets, resolve_spec
from .api.auth import require_key
from .api.metrics import Metrics, Observe
from .api.schemas import options_schema
from .config import ServeConfig
from .transport import connections
from .transport.limits import BodyLimit, HeaderLimit

log = logging.getLogger("edgewise.serve")


def capabilities(config: ServeConfig) -> dict[str, Any]:
    """What ``/v1/capabilities`` returns: the registries' names (plugins loaded), models, limits."""
    from .. import catalog
    from ..registry import describe

    out: dict[str, Any] = {"version": __version__}
    for kind, entries in describe(("tokenizers", "orders", "layouts", "scorers")).items():
        out[kind] = [{"name": name, "source": source} for name, source in entries]
    out["prune_scorers"] = list(PackOptions.spec("prune_scorer").choices)
    out["models"] = list(catalog.model_names())
    out["assets"] = config.assets is not None
    out["auth"] = bool(config.api_key)
    out["proxy"] = config.upstream is not None or config.upstream_anthropic is not None
    out["store"] = config.store is not None  # POST /v1/retrieve answers
    out["limits"] = {"max_body_bytes": config.max_body_bytes, "max_chunks": config.max_chunks,
                     "max_chars": config.max_chars, "timeout_s": config.timeout_s, "threads": config.threads,
                     "queue": config.queue, "max_asset_bytes": config.max_asset_bytes,
                     "max_model_texts": config.max_model_texts}
    return out


def _warm(app: FastAPI, scorers: list[tuple[str, Any]]) -> None:
    """Load each preloaded scorer's model (a first call does), then mark it ready."""
    for spec, scorer in scorers:
        try:
            scorer.score("warm up", ["warm up"])
        except Exception as exc:  # noqa: BLE001 - /readyz and the log say what failed
            log.error("preload %s failed: %s: %s", spec, type(exc).__name__, exc)
            app.state.preload[spec] = f"failed: {type(exc).__name__}: {exc}"
        else:
            app.state.preload[spec] = "ready"


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    config: ServeConfig = app.state.config
    packer = app.state.packer
    app.state.admission = Admission(config.threads, config.queue, config.max_model_texts)
    scorers = []
    for spec in config.preload:  # resolved now: a bad name or a path outside the assets stops the start
        resolved = resolve_spec("scorers", PackOptions(scorer=spec).scorer, app.state.assets)
        scorer = packer.scorer(PackOptions(scorer=resolved))
        if scorer is None:
            raise ConfigError(f"--preload takes a scorer (bm25, dense, cross:PATH ...), but got {spec!r}")
        scorers.append((spec, scorer))
    resolve_spec("orders", config.order, app.state.assets)  # a default calibrated:FILE outside --assets stops the start
    tok = packer.tokenizer(packer.options)
    tok.count("warm up")  # the default tokenizer's tables
    if (speed_up := getattr(tok, "speed_up", None)) is not None:
        speed_up()  # a server is long-lived: its fastest counter from the first request (~0.2 s more at start)
    if config.models_file:  # the user's models: before the capabilities list them and any request names one
        from ..catalog import load_models

        load_models(config.models_file)
    app.state.capabilities = capabilities(config)  # loads the plugins once, here
    await warmup.run(app)  # each endpoint once, so no client's request pays a first-time cost
    threading.Thread(target=_warm, args=(app, scorers), name="edgewise-preload", daemon=True).start()
    try:
        yield
    finally:
        app.state.admission.close()


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema (the requests hold PackOptions' own JSON Schema), with it as a component too."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        schema.setdefault("components", {}).setdefault("schemas", {})["PackOptions"] = options_schema()
        app.openapi_schema = schema
    return app.openapi_schema


def create_app(config: ServeConfig | None = None) -> FastAPI:
    """The app for ``config`` (default: :class:`ServeConfig` with its defaults)."""
    config = config or ServeConfig()
    app = FastAPI(title="edgewise", version=__version__, lifespan=_lifespan,
                  description="Pack retrieved chunks into the prompt an LLM reads best, over HTTP. "
                              "Errors are `{\"error\": {\"type\", \"message\"}}` with a 4xx status.")
    app.state.config = config
    connections.configure(config)  # this process's HTTP limits (each worker builds its app)
    app.state.packer = default_packer()
    app.state.metrics = Metrics()
    app.state.preload = {spec: "loading" for spec in config.preload}
    app.state.assets = Assets(config.assets, config.max_asset_bytes) if config.assets else None
    app.state.store = retrieval.open_configured(config)  # once: a store that cannot be opened stops the start
    errors.install(app, hide=f"{config.assets}/" if config.assets else None)
    keyed = [Depends(require_key)]
    app.include_router(routes.probe_router())
    app.include_router(routes.metrics_router(), dependencies=keyed)
    app.include_router(routes.api_router(), dependencies=keyed)
    app.include_router(retrieval.router(), dependencies=keyed)  # /v1/retrieve: 404 without --store
    app.include_router(ui.router(keyed))  # the inspector page; its curve behind the key
    if config.upstream or config.upstream_anthropic:
        try:
            from . import proxy
        except ModuleNotFoundError as exc:
            if exc.name not in (f"{__package__}.proxy", f"{__package__}.proxy.routes"):
                raise
            raise ConfigError("--upstream needs edgewise.serve.proxy, which this installation does not have") from None
        app.include_router(proxy.router(config), dependencies=keyed)
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes, timeout_s=config.timeout_s)
    app.add_middleware(HeaderLimit, max_headers=config.max_headers)
    if config.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(config.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"], expose_headers=["*"], max_age=600)
    app.add_middleware(Observe, metrics=app.state.metrics, log_bodies=config.log_bodies)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def app_from_env() -> FastAPI:
    """The app of one worker process: the settings ``edgewise serve`` left in the environment."""
    return create_app(ServeConfig.from_env())
