"""Request overhead of ``edgewise serve --ray`` (Ray Serve, 1 replica) vs plain ``edgewise serve`` (uvicorn).

Both servers run at once on 127.0.0.1; POST /v1/pack with the example query and the first 20 chunks
of examples/chunks.json, one request at a time over a kept-alive connection, alternating blocks of
BLOCK requests between the two servers (so a change in machine load hits both), ROUNDS rounds.
Replies are checked equal. Prints per-request latency percentiles and the difference.

    .venv/bin/python benchmarks/serve_ray.py > docs/bench/serve-ray.txt
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
ROUNDS, BLOCK, WARM = 10, 20, 20
BODY = {"query": (ROOT / "examples" / "query.txt").read_text().strip(),
        "chunks": json.loads((ROOT / "examples" / "chunks.json").read_text())[:20], "options": {"budget": 500}}


def port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args: list[str], log: Path) -> tuple[subprocess.Popen, str]:
    p = port()
    env = {**os.environ, "EDGEWISE_API_KEY": ""}
    with open(log, "wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "edgewise", "serve", "--port", str(p), *args],
                                stdout=sink, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{p}"
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                print(f"# {' '.join(args) or '(plain)'}: /healthz answered {time.monotonic() - t0:.1f} s after start")
                return proc, url
        except httpx.TransportError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"{args} did not start: {log.read_text()[-2000:]}")


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    print(f"# load average at start: {os.getloadavg()}; cores: {os.cpu_count()}")
    servers = {}
    try:
        servers["plain"] = start([], tmp / "plain.log")
        servers["ray"] = start(["--ray", "--replicas", "1"], tmp / "ray.log")
        times: dict[str, list[float]] = {"plain": [], "ray": []}
        replies = {}
        with httpx.Client(timeout=60) as client:
            for name, (_, url) in servers.items():
                for _ in range(WARM):
                    replies[name] = client.post(url + "/v1/pack", json=BODY).json()
            assert replies["plain"] == replies["ray"], "the two servers answered differently"
            for _ in range(ROUNDS):
                for name, (_, url) in servers.items():
                    for _ in range(BLOCK):
                        t = time.perf_counter()
                        r = client.post(url + "/v1/pack", json=BODY)
                        times[name].append(time.perf_counter() - t)
                        assert r.status_code == 200
        print(f"# load average at end: {os.getloadavg()}")
        print(f"# POST /v1/pack, 20 chunks, budget 500; {ROUNDS} rounds x {BLOCK} requests each, alternated; "
              f"sequential, kept-alive connection; {WARM} warm-up requests each, not counted")
        print("server   n    median_ms  p10_ms  p90_ms  mean_ms")
        for name, ts in times.items():
            q = statistics.quantiles(ts, n=10)
            print(f"{name:7} {len(ts):4} {statistics.median(ts) * 1e3:10.2f} {q[0] * 1e3:7.2f} {q[-1] * 1e3:7.2f} "
                  f"{statistics.mean(ts) * 1e3:8.2f}")
        diff = statistics.median(times["ray"]) - statistics.median(times["plain"])
        print(f"ray - plain, median: {diff * 1e3:+.2f} ms per request")
    finally:
        for proc, _ in servers.values():
            proc.send_signal(signal.SIGTERM)
        for proc, _ in servers.values():
            try:
                proc.wait(90)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
