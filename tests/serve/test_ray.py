"""``edgewise serve --ray``: the service as a Ray Serve deployment, on a local Ray instance.

``python -m edgewise serve --ray --replicas 1`` runs on a free loopback port (it starts its own Ray
instance, 2 CPUs on the test machine, with HAProxy in front of the replica), is waited for on
/healthz (bounded), answered over HTTP and compared whole with the library and with the plain app;
then SIGTERM must take Serve, HAProxy and Ray down, leaving no process it started. The option checks need no Ray.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

import edgewise  # noqa: E402
from edgewise.cli import main as cli_main  # noqa: E402
from edgewise.errors import ConfigError  # noqa: E402

from ..conftest import ROOT  # noqa: E402
from ..servers import free_port, wait_healthy  # noqa: E402

KEY = "ray-test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
QUERY = (ROOT / "examples" / "query.txt").read_text().strip()
CHUNKS = json.loads((ROOT / "examples" / "chunks.json").read_text())[:20]


def _descendants(pid: int) -> set[int]:
    """Every live process under ``pid`` (Linux /proc)."""
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            out.update(children)
            todo.extend(children)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def ray_server(tmp_path_factory):
    pytest.importorskip("ray.serve")
    tmp = tmp_path_factory.mktemp("ray-serve")
    port = free_port()
    log = tmp / "serve.log"
    env = {**os.environ, "EDGEWISE_API_KEY": KEY, "OMP_NUM_THREADS": "1"}
    with open(log, "wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "edgewise", "serve", "--ray", "--replicas", "1", "--port", str(port)],
                                stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=tmp)
    url = f"http://127.0.0.1:{port}"
    server = {"url": url, "proc": proc, "log": log, "children": set()}
    try:
        problem = wait_healthy(proc, url, 240, poll=0.5)  # a Ray start is 10-40 s on a busy 2-core machine
        if problem:
            pytest.fail(f"edgewise serve --ray {problem}: {log.read_text(errors='replace')[-3000:]}")
        server["children"] = _descendants(proc.pid)
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for pid in server["children"] | _descendants(proc.pid):  # backstop: never leave Ray behind
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_pack_on_ray_serve_equals_the_library(ray_server):
    options = {"budget": 500, "order": "edges", "layout": "sections"}
    r = httpx.post(f"{ray_server['url']}/v1/pack", json={"query": QUERY, "chunks": CHUNKS, "options": options},
                   headers=AUTH, timeout=60)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json() == json.loads(json.dumps(edgewise.pack(QUERY, CHUNKS, options).to_dict()))


@pytest.mark.slow
def test_replies_on_ray_serve_equal_the_plain_apps(ray_server):
    """Errors, auth and the other routes come from the same app: compared whole with it in process."""
    from fastapi.testclient import TestClient

    from edgewise.serve.app import create_app
    from edgewise.serve.config import ServeConfig

    calls = [
        ("post", "/v1/pack", {"query": QUERY, "chunks": CHUNKS, "options": {"top_k": 0}}, AUTH),  # 422
        ("post", "/v1/pack", {"query": QUERY, "chunks": CHUNKS}, {}),  # 401: the key reached the replica
        ("post", "/v1/tokens", {"text": QUERY, "tokenizer": "o200k_base", "max_tokens": 5}, AUTH),
        ("post", "/v1/score", {"query": QUERY, "chunks": CHUNKS[:5], "scorer": "bm25"}, AUTH),
        ("get", "/readyz", None, {}),
    ]
    with TestClient(create_app(ServeConfig(api_key=KEY))) as plain:
        for method, path, body, headers in calls:
            kw = {"json": body} if body is not None else {}
            got = getattr(httpx, method)(f"{ray_server['url']}{path}", headers=headers, timeout=60, **kw)
            want = getattr(plain, method)(path, headers=headers, **kw)
            assert (path, got.status_code, got.json()) == (path, want.status_code, want.json())


def _listener(port: int) -> int | None:
    """The pid of the process listening on 127.0.0.1:``port`` (Linux /proc), or None."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == f"0100007F:{port:04X}" and fields[3] == "0A":  # 127.0.0.1, LISTEN
            inodes.add(f"socket:[{fields[9]}]")
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                    return int(proc.name)
            except OSError:
                continue
    return None


@pytest.mark.slow
def test_the_local_instance_serves_through_haproxy(ray_server):
    """HAProxy listens on --port and forwards to the replica's own HTTP server (not Ray Serve's proxy actor)."""
    pid = _listener(int(ray_server["url"].rsplit(":", 1)[1]))
    assert pid is not None
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "haproxy"
    ray_server["haproxy"] = pid  # HAProxy is not under the server's process tree: the SIGTERM test checks it too
    line = f"edgewise: serving on {ray_server['url']} (Ray Serve, 1 replica, HAProxy ingress); Ctrl-C stops"
    deadline = time.monotonic() + 60  # HAProxy answers /healthz a moment before the command prints its line
    while line not in (log := ray_server["log"].read_text(errors="replace")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert line in log


@pytest.mark.slow
def test_sigterm_stops_ray_serve_and_ray_leaving_no_process(ray_server):
    proc, children = ray_server["proc"], ray_server["children"] | {ray_server.get("haproxy")} - {None}
    assert len(children) >= 4  # Ray's own processes and the replica ran under the server
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(90) is not None
    log = ray_server["log"].read_text(errors="replace")
    assert "edgewise: stopped Ray Serve and the local Ray instance\n" in log, log[-3000:]
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert sorted(p for p in children if _alive(p)) == []


# -- options, no Ray needed ------------------------------------------------------------------------

def test_replicas_and_autoscaling_bounds_become_deployment_options():
    from edgewise.serve.ray_serve import scaling

    assert scaling(None, None, None) == {"num_replicas": 1}
    assert scaling(3, None, None) == {"num_replicas": 3}
    assert scaling(None, None, 4) == {"autoscaling_config": {"min_replicas": 1, "max_replicas": 4}}
    assert scaling(None, 0, 2) == {"autoscaling_config": {"min_replicas": 0, "max_replicas": 2}}


@pytest.mark.parametrize(("args", "message"), [
    ((2, 1, 3), "--replicas 2 fixes the count and --min-replicas/--max-replicas autoscale between bounds: give one or the other"),
    ((0, None, None), "replicas must be > 0, but got 0"),
    ((None, 2, None), "--min-replicas 2 needs --max-replicas, the most replicas Ray Serve may start"),
    ((None, 3, 2), "min_replicas must be <= max_replicas, but got 3 > 2"),
    ((None, None, 0), "max_replicas must be > 0, but got 0"),
])
def test_bad_replica_options_are_refused(args, message):
    from edgewise.serve.ray_serve import scaling

    with pytest.raises(ConfigError) as err:
        scaling(*args)
    assert str(err.value) == message


def test_haproxy_settings_for_a_local_instance_keep_what_the_user_set(tmp_path):
    from edgewise.serve.ray_serve import haproxy_env

    env = haproxy_env({}, tmp_path)
    stats = env.pop("RAY_SERVE_HAPROXY_STATS_PORT")
    assert 0 < int(stats) < 65536
    assert env == {"RAY_SERVE_ENABLE_HA_PROXY": "1", "RAY_SERVE_HAPROXY_METRICS_ENABLED": "0",
                   "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "2",
                   "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": f"{tmp_path}/haproxy.cfg",
                   "RAY_SERVE_HAPROXY_SOCKET_PATH": f"{tmp_path}/admin.sock",
                   "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": str(tmp_path),
                   "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": f"{tmp_path}/server-state",
                   "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": f"{tmp_path}/metrics.sock"}
    assert haproxy_env({"RAY_SERVE_ENABLE_HA_PROXY": "0"}, tmp_path) == {}  # Ray Serve's proxy, as asked
    mine = haproxy_env({"RAY_SERVE_ENABLE_HA_PROXY": "1", "RAY_SERVE_HAPROXY_STATS_PORT": "9999"}, tmp_path)
    assert ("RAY_SERVE_ENABLE_HA_PROXY" in mine, "RAY_SERVE_HAPROXY_STATS_PORT" in mine) == (False, False)


def test_ray_flags_without_ray_are_refused(capsys):
    assert cli_main(["serve", "--replicas", "2", "--max-replicas", "3"]) == 2
    assert capsys.readouterr().err == ("edgewise: error: --replicas 2 --max-replicas 3 applies to a Ray Serve deployment: "
                                       "add --ray (without it, --workers sets the processes)\n")
