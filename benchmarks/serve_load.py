"""Sustained load on ``edgewise serve``'s ``/v1/pack``, next to calling ``pack()`` in-process.

For each number of uvicorn workers (default 1 and 2) the script starts ``edgewise serve --host
127.0.0.1`` as a subprocess on a free port, waits for ``/healthz``, and for each chunk count (default
20 and 200 chunks of ~150 cl100k tokens, budget 4,000) and each number of concurrent clients (default
1 and 4) sends ``POST /v1/pack`` back to back from that many threads (one ``httpx.Client`` each) for
``--duration`` seconds (default 60), or until ``--max-requests`` (default 20,000) have been sent,
whichever comes first. Requests cycle through a pool of ``--pool`` distinct inputs (default 64),
windows of the NaturalQuestions passages in the data file, so the server's count cache sees what a
service sees: chunks that repeat, and chunks that do not.

Reported per row: requests, errors (any status other than 200, or a transport error), throughput
(requests per second of wall time), latency p50 / p95 / p99 in ms (wall time, send to full JSON
response), the server's own p50 (``duration_ms`` of its access log: from the request's arrival to
the end of the response, so without the client's and the loopback's share), and the same pool packed
in-process in one thread (``pack(...).to_dict()`` then
``json.dumps``, what the service does besides HTTP) for the same number of calls, to give **service
overhead**: the service's p50 latency at one client over the in-process p50, and, at N clients, its
throughput over the in-process throughput of one thread; **server overhead**: the server's p50 over
the in-process p50 (the client shares the 2 cores with the server here, which the first ratio
includes). The script only talks to 127.0.0.1, is
bounded in requests and time, and stops its servers itself.

    .venv/bin/python benchmarks/serve_load.py [--duration 60] [--workers 1,2] [--sizes 20,200]
        [--clients 1,4] [--budget 4000] [--pool 64] [--max-requests 20000] [--data FILE|DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

import edgewise
from edgewise.eval.data import data_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def inputs(path: Path, n_chunks: int, pool: int, seed: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in gzip.open(path, "rt", encoding="utf-8")]
    words: list[str] = []
    titles: list[str] = []
    for row in rows:
        passage = row["ctxs"][0]["text"].split()
        words += passage
        titles += [row["ctxs"][0]["title"]] * len(passage)
    rnd = random.Random(seed)
    out = []
    for k in range(pool):
        scores = sorted((rnd.random() for _ in range(n_chunks)), reverse=True)
        chunks = []
        for i in range(n_chunks):
            at = rnd.randrange(len(words) - 120)
            chunks.append({"id": f"c{k}-{i}", "title": titles[at], "text": " ".join(words[at:at + 110]),
                           "score": scores[i]})
        out.append({"query": rows[rnd.randrange(len(rows))]["question"], "chunks": chunks})
    return out


class Server:
    def __init__(self, workers: int, pythonpath: str | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "edgewise", "serve", "--host", "127.0.0.1", "--port", str(self.port),
               "--workers", str(workers), "--log-level", "warning"]
        env = {k: v for k, v in os.environ.items() if k != "EDGEWISE_API_KEY"}
        if pythonpath:  # another checkout's src: its edgewise is the one imported
            env["PYTHONPATH"] = pythonpath
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)  # the access log: JSON lines
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        self.read = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"edgewise serve did not answer /healthz on {self.url} within 60 s")

    def durations(self) -> list[float]:
        """Server-side ms of each /v1/pack since the last call (the access log's duration_ms)."""
        text = Path(self.log.name).read_text()
        new, self.read = text[self.read:], len(text)
        out = []
        for line in new.splitlines():
            if line.startswith("{") and '"/v1/pack"' in line:
                out.append(json.loads(line)["duration_ms"])
        return out

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def load(url: str, bodies: list[bytes], clients: int, duration: float, max_requests: int) -> dict[str, Any]:
    latencies: list[float] = []
    errors = [0]
    sent = [0]
    lock = threading.Lock()
    stop_at = time.monotonic() + duration

    def client(offset: int) -> None:
        # TCP_NODELAY, as production HTTP clients set it: without it, a request sent as two writes
        # (headers, body) waits for the server's delayed ACK (~40 ms on Linux)
        nodelay = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        with httpx.Client(timeout=60, transport=nodelay) as http:
            i = offset
            while time.monotonic() < stop_at:
                with lock:
                    if sent[0] >= max_requests:
                        return
                    sent[0] += 1
                body = bodies[i % len(bodies)]
                i += clients
                start = time.perf_counter()
                try:
                    r = http.post(url + "/v1/pack", content=body, headers={"content-type": "application/json"})
                    ok = r.status_code == 200 and b'"prompt"' in r.content
                except httpx.HTTPError:
                    ok = False
                took = time.perf_counter() - start
                with lock:
                    latencies.append(took)
                    errors[0] += not ok

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    return {"requests": len(latencies), "errors": errors[0], "wall": wall, "latencies": latencies}


def in_process(payloads: list[dict[str, Any]], budget: int, calls: int) -> dict[str, Any]:
    times = []
    for i in range(calls):
        p = payloads[i % len(payloads)]
        start = time.perf_counter()
        json.dumps(edgewise.pack(p["query"], p["chunks"], budget=budget).to_dict())
        times.append(time.perf_counter() - start)
    return {"p50": statistics.median(times), "throughput": len(times) / sum(times)}


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--sizes", default="20,200")
    ap.add_argument("--clients", default="1,4")
    ap.add_argument("--budget", type=int, default=4000)
    ap.add_argument("--pool", type=int, default=64)
    ap.add_argument("--max-requests", type=int, default=20000)
    ap.add_argument("--data", help="the NQ file or its folder (default: $EDGEWISE_DATA, ../shared/data)")
    args = ap.parse_args(argv)
    workers = [int(x) for x in args.workers.split(",")]
    sizes = [int(x) for x in args.sizes.split(",")]
    clients = [int(x) for x in args.clients.split(",")]
    path = data_path("nq-open-oracle-dev.jsonl.gz", args.data)
    pools = {n: inputs(path, n, args.pool, seed=n) for n in sizes}
    bodies = {n: [json.dumps({**p, "options": {"budget": args.budget}}).encode() for p in pools[n]] for n in sizes}
    base = {n: in_process(pools[n], args.budget, max(200, 2 * args.pool)) for n in sizes}
    print(f"edgewise {edgewise.__version__}; Python {sys.version.split()[0]}; {os.cpu_count()} CPUs; "
          f"budget {args.budget}; {args.duration:g} s a row (at most {args.max_requests:,} requests); "
          f"pool of {args.pool} inputs; load average {os.getloadavg()[0]:.2f} before")
    print()
    print("| workers | chunks | clients | requests | errors | req/s | p50 ms | p95 ms | p99 ms | server p50 ms | "
          "in-process p50 ms | in-process req/s (1 thread) | overhead (p50 at 1 client; throughput at N) | "
          "server overhead (server p50 / in-process p50) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in workers:
        server = Server(w)
        try:
            for n in sizes:
                load(server.url, bodies[n], 1, min(3.0, args.duration), 50)  # warm the workers' caches and pools
                for c in clients:
                    server.durations()  # skip what came before this row
                    r = load(server.url, bodies[n], c, args.duration, args.max_requests)
                    served = statistics.median(server.durations())
                    lat = [x * 1000 for x in r["latencies"]]
                    rps = r["requests"] / r["wall"]
                    b = base[n]
                    overhead = (statistics.median(lat) / 1000 / b["p50"]) if c == 1 else (b["throughput"] / rps)
                    print(f"| {w} | {n} | {c} | {r['requests']:,} | {r['errors']} | {rps:.1f} | {pct(lat, 50):.1f} | "
                          f"{pct(lat, 95):.1f} | {pct(lat, 99):.1f} | {served:.1f} | {b['p50'] * 1000:.1f} | "
                          f"{b['throughput']:.1f} | {overhead:.2f}× | {served / 1000 / b['p50']:.2f}× |", flush=True)
        finally:
            server.stop()
    print(f"\nload average {os.getloadavg()[0]:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
