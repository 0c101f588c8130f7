"""Start uvicorn with a :class:`~edgewise.serve.config.ServeConfig`: one process, or several workers.

With one worker the app is built here and served. With more, uvicorn starts each worker process
from an import string, so the settings travel in the environment (:meth:`ServeConfig.to_env`) and
each worker builds the same app (:func:`edgewise.serve.app.app_from_env`); Prometheus'
multiprocess mode gets a directory of its own unless ``PROMETHEUS_MULTIPROC_DIR`` is set, so
``/metrics`` adds up every worker. The access log (one JSON line per request) goes to stderr.
The HTTP protocol (h11 or httptools, ``--http``) bounds headers, their time and the open
connections of each process (:mod:`edgewise.serve.transport.connections`).
"""

from __future__ import annotations

import copy
import os
import tempfile
from typing import Any

from .config import ENV_VAR, ServeConfig


def log_config(level: str = "info") -> dict[str, Any]:
    """uvicorn's logging setup plus edgewise's loggers: the access log as bare JSON lines on stderr."""
    from uvicorn.config import LOGGING_CONFIG

    cfg = copy.deepcopy(LOGGING_CONFIG)
    cfg["formatters"]["bare"] = {"format": "%(message)s"}
    cfg["handlers"]["edgewise_access"] = {"class": "logging.StreamHandler", "formatter": "bare",
                                          "stream": "ext://sys.stderr"}
    cfg["loggers"]["edgewise.serve.access"] = {"handlers": ["edgewise_access"], "level": "INFO", "propagate": False}
    cfg["loggers"]["edgewise.serve"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return cfg


def run(config: ServeConfig, *, log_level: str = "info") -> None:
    """Serve until interrupted."""
    import uvicorn

    from .transport.connections import protocol_path

    common: dict[str, Any] = {"host": config.host, "port": config.port, "access_log": False,
                              "log_level": log_level, "log_config": log_config(log_level),
                              "timeout_graceful_shutdown": 10, "timeout_keep_alive": config.keep_alive_s,
                              "h11_max_incomplete_event_size": config.max_header_bytes,
                              "http": protocol_path(config.http)}  # see connections.py
    if config.workers == 1:
        from .app import create_app

        uvicorn.run(create_app(config), **common)
        return
    if config.store is not None:  # each worker opens it: a store that cannot be opened stops the start here first
        from .api.retrieval import open_configured

        open_configured(config)
    os.environ[ENV_VAR] = config.to_env()
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="edgewise-metrics-")
    uvicorn.run("edgewise.serve.app:app_from_env", factory=True, workers=config.workers, **common)
