"""``ServeConfig``: every setting of the server, in one frozen value.

The command line (:mod:`edgewise.cli.serve`) builds one; :func:`edgewise.serve.app.create_app`
reads it. With several uvicorn workers each worker process builds its app from the environment
(:meth:`ServeConfig.to_env` / :meth:`ServeConfig.from_env`); the API key itself is never written
there, only the name of the variable that holds it.

>>> c = ServeConfig(port=9000, max_chunks=50, order="auto", api_key=None)
>>> back = ServeConfig.from_env({ENV_VAR: c.to_env(), "EDGEWISE_API_KEY": ""})
>>> back == c, back.order
(True, 'auto')
>>> ServeConfig(order="nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
edgewise.errors.ConfigError: unknown order 'nope'; choose one of: edges, auto, ...
>>> ServeConfig(max_chunks=0)
Traceback (most recent call last):
...
edgewise.errors.ConfigError: max_chunks must be > 0, but got 0
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..checks import check_int, check_number
from ..errors import ConfigError

ENV_VAR = "EDGEWISE_SERVE_CONFIG"  # how the parent process hands the settings to its workers
API_KEY_ENV = "EDGEWISE_API_KEY"
HTTP_PARSERS = ("auto", "h11", "httptools")


def _key_from_env(name: str = API_KEY_ENV) -> str | None:
    return os.environ.get(name) or None


def _check_order(order: str) -> None:
    """``order`` as the option checks it, and a name the orders registry knows (with the argument
    it declares): else the one-line error that lists the known ones."""
    from ..options import PackOptions
    from ..order import resolve

    PackOptions(order=order)
    resolve(order)


@dataclass(frozen=True)
class ServeConfig:
    """The server's settings (defaults are what ``edgewise serve`` uses without flags)."""

    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    assets: Path | None = None  # the only directory file-backed specs (template:FILE ...) may name
    max_body_bytes: int = 16 * 1024 * 1024
    max_chunks: int = 10_000
    max_chars: int = 8_000_000  # characters of text (query, chunks, text fields) in one request
    timeout_s: float = 30.0  # per request: reading the body (408) and doing the work (504)
    api_key: str | None = field(default_factory=_key_from_env, repr=False)
    api_key_env: str = API_KEY_ENV
    cors_origins: tuple[str, ...] = ()
    preload: tuple[str, ...] = ()  # scorer specs whose models load at start (dense, cross:PATH ...)
    upstream: str | None = None  # an OpenAI-compatible base URL (with its /v1)
    upstream_anthropic: str | None = None  # an Anthropic-compatible base URL (as the anthropic client takes it)
    upstream_timeout_s: float = 300.0
    models_file: Path | None = None
    history_share: float = 0.5
    log_bodies: bool = False
    threads: int = 8  # worker threads for packing and scoring, per process
    queue: int = 32  # requests that may wait for a thread, per process; past it: 503
    max_asset_bytes: int = 1024 * 1024  # the largest template or profile read from --assets
    http: str = "auto"  # uvicorn's HTTP parser: auto (httptools if installed), h11, httptools
    max_header_bytes: int = 32 * 1024  # request line and headers, in bytes: 431 past it
    max_headers: int = 100  # header lines: 431 past it
    header_timeout_s: float = 10.0  # request line and headers must arrive within it: else closed
    keep_alive_s: float = 5.0  # an idle connection between requests is closed after it
    max_connections: int = 1000  # open connections per process; past it the oldest idle one is closed
    order: str = "edges"  # the placement of every request that names no order (a request's own order wins)
    max_model_texts: int = 5000  # texts a request may send through a model (estimated before it starts): 422 past it
    store: str | None = None  # a store edgewise index wrote (a folder or a URL): POST /v1/retrieve reads it

    def __post_init__(self) -> None:
        check_int("port", self.port, minimum=0, error=ConfigError)
        for name in ("workers", "max_body_bytes", "max_chunks", "max_chars", "threads", "max_asset_bytes",
                     "max_header_bytes", "max_headers", "max_connections", "max_model_texts"):
            check_int(name, getattr(self, name), minimum=1, error=ConfigError)
        check_int("queue", self.queue, minimum=0, error=ConfigError)
        for name in ("timeout_s", "upstream_timeout_s", "header_timeout_s", "keep_alive_s"):
            check_number(name, getattr(self, name), above=0, what="a number > 0", error=ConfigError)
        if self.http not in HTTP_PARSERS:
            raise ConfigError(f"http must be one of {', '.join(HTTP_PARSERS)}, but got {self.http!r}")
        check_number("history_share", self.history_share, low=0, high=1, what="a share in [0, 1]", error=ConfigError)
        _check_order(self.order)
        if self.assets is not None:
            if not isinstance(self.assets, Path):
                object.__setattr__(self, "assets", Path(self.assets))
            real = self.assets.resolve()
            if not real.is_dir():
                raise ConfigError(f"--assets must be a directory, but {str(self.assets)!r} is not one")
            object.__setattr__(self, "assets", real)
        if self.models_file is not None and not isinstance(self.models_file, Path):
            object.__setattr__(self, "models_file", Path(self.models_file))
        if self.store is not None and not isinstance(self.store, str):
            object.__setattr__(self, "store", str(self.store))
        for name in ("cors_origins", "preload"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def to_env(self) -> str:
        """The settings as JSON for a worker process (the API key stays in its own variable)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "api_key":
                continue
            value = getattr(self, f.name)
            out[f.name] = str(value) if isinstance(value, Path) else list(value) if isinstance(value, tuple) else value
        return json.dumps(out)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServeConfig:
        """The settings a parent process left in ``environ`` (default ``os.environ``)."""
        environ = os.environ if environ is None else environ
        text = environ.get(ENV_VAR)
        if not text:
            raise ConfigError(f"{ENV_VAR} is not set: start the server with `edgewise serve`")
        data = json.loads(text)
        for name in ("assets", "models_file"):
            if data.get(name) is not None:
                data[name] = Path(data[name])
        key_env = data.get("api_key_env", API_KEY_ENV)
        return cls(**data, api_key=environ.get(key_env) or None)
