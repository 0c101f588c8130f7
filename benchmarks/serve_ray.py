"""Request overhead of ``edgewise serve --ray`` (Ray Serve, 1 replica) against plain ``edgewise serve``,
and Ray Serve's own cost for a request, measured on a hello-world deployment in the same run.

Servers, all running at once on 127.0.0.1:

- **plain**: ``edgewise serve`` (uvicorn, one process);
- **ray**: ``edgewise serve --ray --replicas 1``: its local Ray instance with HAProxy in front of the
  replica (what ``--ray`` does by default);
- **ray-proxy**: the same with ``RAY_SERVE_ENABLE_HA_PROXY=0``: Ray Serve's Python proxy actor,
  which hands each request to the replica as a Ray call (the ingress ``--ray`` used before);
- **hello-plain** and **hello-ray-proxy**: a FastAPI app that reads the body and answers a fixed
  reply of the size of the pack's, under uvicorn and as a Ray Serve deployment behind Ray's proxy
  (its own local Ray instance, started by this script): the difference is Ray's fixed cost for a
  request, with no edgewise code in it.

Each request is POST /v1/pack (``/`` for the hello apps) with the example query and the first 20
chunks of examples/chunks.json, budget 500, one at a time over a kept-alive connection, in
alternating blocks of BLOCK requests across the servers for ROUNDS rounds (a change in machine load
hits them all alike), after WARM requests each. Times are the client's (send to full reply); the
edgewise servers' replies are checked equal.

    .venv/bin/python benchmarks/serve_ray.py [--rounds 10] [--block 20] > docs/bench/serve-ray.txt
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from fastapi import FastAPI, Request, Response  # at module level: the hello route's annotations name them

ROOT = Path(__file__).resolve().parents[1]
WARM = 20
BODY = {"query": (ROOT / "examples" / "query.txt").read_text().strip(),
        "chunks": json.loads((ROOT / "examples" / "chunks.json").read_text())[:20], "options": {"budget": 500}}


def port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hello_app(size: int) -> FastAPI:
    app = FastAPI()
    reply = json.dumps({"x": "x" * max(size - 8, 0)}).encode()

    @app.post("/")
    async def hello(request: Request) -> Response:
        await request.body()
        return Response(reply, media_type="application/json")

    return app


def host_hello(p: int, size: int, on_ray: bool) -> None:
    """``--host-hello``: serve the hello app on port ``p`` (uvicorn, or Ray Serve behind its proxy) until SIGTERM."""
    if not on_ray:
        import uvicorn

        uvicorn.run(hello_app(size), host="127.0.0.1", port=p, log_level="warning")
        return
    os.environ["RAY_SERVE_ENABLE_HA_PROXY"] = "0"
    import ray
    from ray import serve

    from edgewise.raysupport import connect

    connect(None)
    serve.start(http_options={"host": "127.0.0.1", "port": p})
    ingress = serve.ingress(hello_app(size))(type("Hello", (), {}))
    serve.run(serve.deployment(name="hello", num_replicas=1)(ingress).bind(), name="hello", route_prefix="/",
              blocking=False)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("edgewise: serving", flush=True)
    stop.wait()
    serve.shutdown()
    ray.shutdown()


def start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(log, "wb") as sink:
        return subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, **env})


def wait(name: str, proc: subprocess.Popen, url: str, log: Path, path: str) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < 400:
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited: {log.read_text(errors='replace')[-3000:]}")
        try:
            body = BODY if path == "/v1/pack" else {}
            if httpx.post(url + path, json=body, timeout=5).status_code == 200:
                print(f"# {name}: answered {time.monotonic() - t0:.1f} s after start", flush=True)
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{name} did not answer: {log.read_text(errors='replace')[-3000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--block", type=int, default=20)
    ap.add_argument("--host-hello", type=int, help=argparse.SUPPRESS)  # internal: the hello servers
    ap.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--on-ray", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.host_hello:
        host_hello(args.host_hello, args.size, args.on_ray)
        return
    tmp = Path(tempfile.mkdtemp())
    print(f"# load average at start: {tuple(round(x, 2) for x in os.getloadavg())}; cores: {os.cpu_count()} "
          "(shared with other jobs)")
    me, edgewise = [sys.executable, __file__], [sys.executable, "-m", "edgewise", "serve"]
    size = 13_600  # the hello reply's bytes: about the pack reply's (the table prints both)
    specs = {"plain": (edgewise, {}, "/v1/pack"),
             "ray": (edgewise + ["--ray", "--replicas", "1"], {}, "/v1/pack"),
             "ray-proxy": (edgewise + ["--ray", "--replicas", "1"], {"RAY_SERVE_ENABLE_HA_PROXY": "0"}, "/v1/pack"),
             "hello-plain": (me + ["--size", str(size)], {}, "/"),
             "hello-ray-proxy": (me + ["--size", str(size), "--on-ray"], {}, "/")}
    servers: dict[str, tuple[subprocess.Popen, str, str]] = {}
    try:
        for name, (cmd, env, path) in specs.items():
            p = port()
            flag = ["--port", str(p)] if cmd[1] == "-m" else ["--host-hello", str(p)]
            log = tmp / f"{name}.log"
            servers[name] = (start(cmd + flag, log, {"EDGEWISE_API_KEY": "", **env}), f"http://127.0.0.1:{p}", path)
        for name, (proc, url, path) in servers.items():
            wait(name, proc, url, tmp / f"{name}.log", path)
        measure(servers, args.rounds, args.block)
    finally:
        for proc, _, _ in servers.values():
            proc.send_signal(signal.SIGTERM)
        for proc, _, _ in servers.values():
            try:
                proc.wait(90)
            except subprocess.TimeoutExpired:
                proc.kill()


def measure(servers: dict[str, tuple[subprocess.Popen, str, str]], rounds: int, block: int) -> None:
    times: dict[str, list[float]] = {name: [] for name in servers}
    replies, sizes = {}, {}
    with httpx.Client(timeout=60) as client:
        for name, (_, url, path) in servers.items():
            for _ in range(WARM):
                r = client.post(url + path, json=BODY)
            sizes[name] = len(r.content)
            if path == "/v1/pack":
                replies[name] = r.json()
        assert all(v == replies["plain"] for v in replies.values()), "the servers answered differently"
        for _ in range(rounds):
            for name, (_, url, path) in servers.items():
                for _ in range(block):
                    t = time.perf_counter()
                    r = client.post(url + path, json=BODY)
                    times[name].append(time.perf_counter() - t)
                    assert r.status_code == 200, (name, r.status_code, r.text[:300])
    print(f"# load average at end: {tuple(round(x, 2) for x in os.getloadavg())}")
    print(f"# POST /v1/pack (hello: POST /), 20 chunks, budget 500, {len(json.dumps(BODY)):,} bytes; {rounds} rounds "
          f"x {block} requests each, alternated; sequential, kept-alive connection; {WARM} warm-up requests each")
    print("server            n  reply_bytes  median_ms  p10_ms  p90_ms  mean_ms  median / plain")
    plain = statistics.median(times["plain"])
    for name, ts in times.items():
        q = statistics.quantiles(ts, n=10)
        print(f"{name:16} {len(ts):4} {sizes[name]:12,} {statistics.median(ts) * 1e3:10.2f} {q[0] * 1e3:7.2f} "
              f"{q[-1] * 1e3:7.2f} {statistics.mean(ts) * 1e3:8.2f} {statistics.median(ts) / plain:14.2f}×")
    med = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
    print(f"ray - plain, median: {med['ray'] - med['plain']:+.2f} ms per request (HAProxy in front of the replica)")
    print(f"ray-proxy - plain, median: {med['ray-proxy'] - med['plain']:+.2f} ms per request")
    print(f"hello-ray-proxy - hello-plain, median: {med['hello-ray-proxy'] - med['hello-plain']:+.2f} ms per request "
          "(Ray Serve's proxy and its Ray call, no edgewise code)")


if __name__ == "__main__":
    main()
