"""``edgewise serve``: the HTTP service (and, with ``--upstream`` or ``--upstream-anthropic``, the proxy).

The flags are the fields of :class:`edgewise.serve.config.ServeConfig`; ``docs/serve.md`` is the
operator's guide. The API key is read from the environment (``EDGEWISE_API_KEY``, or the variable
``--api-key-env`` names), never from a flag.

>>> import argparse
>>> from edgewise.cli.lazy import build_named
>>> parser = argparse.ArgumentParser(prog="edgewise")
>>> add_commands(parser.add_subparsers(dest="command"))
>>> build_named(parser, ["serve"])
>>> a = parser.parse_args(["serve", "--port", "9000", "--preload", "dense,bm25", "--cors-origin", "https://a.example",
...                        "--order", "auto"])
>>> c = config_from_args(a, environ={})
>>> c.port, c.preload, c.cors_origins, c.api_key, c.order, c.max_model_texts
(9000, ('dense', 'bm25'), ('https://a.example',), None, 'auto', 5000)
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .lazy import command


def config_from_args(a: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Any:
    """The :class:`ServeConfig` the flags ask for (the key from ``environ``, default ``os.environ``)."""
    from ..serve.config import ServeConfig

    environ = os.environ if environ is None else environ
    preload = tuple(p.strip() for item in a.preload for p in item.split(",") if p.strip())
    return ServeConfig(
        host=a.host, port=a.port, workers=a.workers, assets=a.assets, max_body_bytes=a.max_body_bytes,
        max_chunks=a.max_chunks, max_chars=a.max_chars, timeout_s=a.timeout, api_key=environ.get(a.api_key_env) or None,
        api_key_env=a.api_key_env, cors_origins=tuple(a.cors_origin), preload=preload, upstream=a.upstream,
        upstream_anthropic=a.upstream_anthropic, upstream_timeout_s=a.upstream_timeout, models_file=a.models,
        history_share=a.history_share,
        log_bodies=a.log_bodies, threads=a.threads, queue=a.queue, max_asset_bytes=a.max_asset_bytes, http=a.http,
        max_header_bytes=a.max_header_bytes, max_headers=a.max_headers, header_timeout_s=a.header_timeout,
        keep_alive_s=a.keep_alive, max_connections=a.max_connections, order=a.order,
        max_model_texts=a.max_model_texts, store=a.store,
    )


def cmd_serve(a: argparse.Namespace) -> None:
    from ..errors import InputError

    ray_only = {"--replicas": a.replicas, "--min-replicas": a.min_replicas, "--max-replicas": a.max_replicas,
                "--ray-address": a.ray_address}
    if not a.ray and any(v is not None for v in ray_only.values()):
        given = " ".join(f"{k} {v}" for k, v in ray_only.items() if v is not None)
        raise InputError(f"{given} applies to a Ray Serve deployment: add --ray (without it, --workers sets the processes)")
    try:
        from ..serve.server import run
    except ImportError as exc:
        raise ImportError(f"edgewise serve needs FastAPI, uvicorn and prometheus-client ({exc.name} is missing): "
                          "pip install -e '.[serve]' (in an edgewise checkout)") from None
    if a.ray:
        from ..serve.ray_serve import run as run_on_ray

        run_on_ray(config_from_args(a), address=a.ray_address, replicas=a.replicas, min_replicas=a.min_replicas,
                   max_replicas=a.max_replicas)
        return
    run(config_from_args(a), log_level=a.log_level)


def _connection_args(conn: Any, d: Any) -> None:
    """The HTTP connection limits (uvicorn's, per process); ``d`` holds the defaults."""
    from ..serve.config import HTTP_PARSERS

    conn.add_argument("--http", default=d.http, choices=HTTP_PARSERS,
                      help="HTTP/1.1 parser: httptools where installed (auto, the default) or h11; the limits hold for both")
    conn.add_argument("--max-header-bytes", type=int, default=d.max_header_bytes,
                      help=f"request line and headers, in bytes (431; default {d.max_header_bytes})")
    conn.add_argument("--max-headers", type=int, default=d.max_headers,
                      help=f"most header lines per request (431; default {d.max_headers})")
    conn.add_argument("--header-timeout", type=float, default=d.header_timeout_s,
                      help=f"seconds for the request line and headers to arrive, else the connection is closed "
                           f"(default {d.header_timeout_s:g})")
    conn.add_argument("--keep-alive", type=float, default=d.keep_alive_s,
                      help=f"seconds an idle connection stays open between requests (default {d.keep_alive_s:g})")
    conn.add_argument("--max-connections", type=int, default=d.max_connections,
                      help=f"open connections; past it the oldest idle one is closed (default {d.max_connections})")


def _serve_args(p: argparse.ArgumentParser) -> None:
    from ..options import option_argument
    from ..serve.config import API_KEY_ENV, ServeConfig

    d = ServeConfig(api_key=None)
    p.add_argument("--host", default=d.host, help=f"address to listen on (default {d.host}: this machine only)")
    p.add_argument("--port", type=int, default=d.port, help=f"port (default {d.port})")
    p.add_argument("--workers", type=int, default=d.workers, help="uvicorn worker processes (default 1)")
    p.add_argument("--threads", type=int, default=d.threads,
                   help=f"threads per process for packing and scoring (default {d.threads})")
    p.add_argument("--queue", type=int, default=d.queue,
                   help=f"requests that may wait for a thread, per process; more get a 503 (default {d.queue})")
    p.add_argument("--assets", type=Path, metavar="DIR",
                   help="the only directory file-backed specs (template:FILE, hf:PATH, cross:PATH ...) may name; "
                        "without it, they are refused")
    p.add_argument("--preload", action="append", default=[], metavar="SCORER",
                   help="scorers whose models load at start, e.g. dense or cross:PATH (repeat or comma-separate)")
    p.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes,
                   help=f"largest request body, in bytes (413; default {d.max_body_bytes})")
    p.add_argument("--max-chunks", type=int, default=d.max_chunks, help=f"most chunks per request (422; default {d.max_chunks})")
    p.add_argument("--max-chars", type=int, default=d.max_chars,
                   help=f"most characters of text per request (422; default {d.max_chars})")
    p.add_argument("--max-model-texts", type=int, default=d.max_model_texts, metavar="N",
                   help=f"most texts a request may send through a model (chunks a model scorer rescores, sentences "
                        f"the sentence model reads), estimated before any work starts (422; default "
                        f"{d.max_model_texts})")
    p.add_argument("--timeout", type=float, default=d.timeout_s,
                   help=f"seconds a request may take: its body (408), then its work (504) (default {d.timeout_s:g})")
    p.add_argument("--store", metavar="DIR|URL",
                   help="a store edgewise index wrote: POST /v1/retrieve (and the inspector's retrieve row) reads it; "
                        "opened at start (a store that cannot be opened stops the start)")
    p.add_argument("--max-asset-bytes", type=int, default=d.max_asset_bytes,
                   help=f"largest template or profile read from --assets, in bytes (422; default {d.max_asset_bytes})")
    option_argument(p, "order", "--order", default=d.order,
                    help="placement of every request that names no order (a request's own order wins); auto: by the "
                         "measured profile of the request's model; one of: {names}")
    _connection_args(p.add_argument_group("connections (uvicorn; per process)"), d)
    p.add_argument("--api-key-env", default=API_KEY_ENV, metavar="NAME",
                   help=f"environment variable holding the bearer token clients must send (default {API_KEY_ENV}; "
                        "unset or empty: no auth)")
    p.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                   help="allow browser calls from this origin (repeat; default: CORS off)")
    p.add_argument("--log-bodies", action="store_true", help="put request bodies in the access log (off by default)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument("--upstream", metavar="URL", help="proxy /v1/chat/completions to this OpenAI-compatible server")
    p.add_argument("--upstream-anthropic", metavar="URL",
                   help="proxy /v1/messages to this Anthropic-compatible server (the base URL the anthropic client takes)")
    p.add_argument("--upstream-timeout", type=float, default=d.upstream_timeout_s,
                   help=f"seconds to wait for the upstream (default {d.upstream_timeout_s:g})")
    p.add_argument("--models", type=Path, metavar="FILE", help="your models (TOML or JSON): name, tokenizer, context window")
    p.add_argument("--history-share", type=float, default=d.history_share,
                   help=f"share of the budget older conversation turns may keep (default {d.history_share:g})")
    ray = p.add_argument_group("Ray Serve (pip install -e '.[ray]', in an edgewise checkout)")
    ray.add_argument("--ray", action="store_true", help="serve as a Ray Serve deployment (FastAPI ingress) instead of uvicorn")
    ray.add_argument("--ray-address", metavar="ADDR",
                     help="the Ray cluster (auto, HOST:PORT, ray://HOST:10001; default: start a local instance)")
    ray.add_argument("--replicas", type=int, help="replicas, fixed (default 1)")
    ray.add_argument("--min-replicas", type=int, help="autoscale: fewest replicas (default 1; needs --max-replicas)")
    ray.add_argument("--max-replicas", type=int, help="autoscale: most replicas")
    p.set_defaults(func=cmd_serve)


def add_commands(subparsers: Any) -> None:
    """Add ``serve`` (its flags are added when the command is named)."""
    command(subparsers, "serve", _serve_args, help="serve edgewise over HTTP (and proxy an OpenAI-compatible server)")


def main(argv: list[str] | None = None) -> int:
    """``python -m edgewise.serve``: ``edgewise serve`` before it is registered with the ``edgewise`` command."""
    import sys

    from . import _Parser
    from .lazy import build_named

    parser = _Parser(prog="edgewise")
    add_commands(parser.add_subparsers(dest="command", required=True, parser_class=_Parser))
    argv = ["serve", *(sys.argv[1:] if argv is None else argv)]
    build_named(parser, argv)
    args = parser.parse_args(argv)
    from ..errors import EdgewiseError

    try:
        args.func(args)
    except (EdgewiseError, ImportError) as exc:
        print(f"edgewise: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0
