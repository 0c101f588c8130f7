"""What ``edgewise serve`` adds to a pack: its own time per ``/v1/pack`` against ``Packer.pack`` in-process.

Starts ``edgewise serve --host 127.0.0.1`` (one worker) from this checkout and, with
``--baseline-src DIR``, a second server from another checkout's ``src`` (the alternative, e.g. the
commit before a change), both at once. For each chunk count (default 20 and 200 chunks of ~150
cl100k tokens, budget 4,000; NQ passage windows, a pool of 64 distinct inputs cycled, as
``serve_load.py``) it alternates blocks of ``--block`` requests: in-process, then each server, for
``--rounds`` rounds, one request at a time over a kept-alive connection (TCP_NODELAY), so a change
in the machine's load hits every column alike. Before the rounds every input has been sent once to
each server and packed once in-process (the count caches hold the same texts everywhere).

Columns (medians, ms):

- **pack**: ``Packer.pack(...).to_dict()`` in this process (the shared default packer, its counter
  sped up and the objects built before the rounds frozen out of the garbage collector, as the
  server's are);
- **pack+json** and **pack+orjson**: the same plus ``json.dumps`` (what the in-process baseline of
  ``serve_load.py`` times) or ``orjson.dumps``;
- **server**: the server's own time per request, ``duration_ms`` of its access log (from the
  request's arrival to the end of the response), and the ratios to the in-process columns.

    .venv/bin/python benchmarks/serve_overhead.py [--rounds 10] [--block 40] [--sizes 20,200]
        [--budget 4000] [--data FILE|DIR] [--baseline-src DIR] [--tiny]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import Server, inputs  # noqa: E402

import edgewise  # noqa: E402
from edgewise.eval.data import data_path  # noqa: E402
from edgewise.packing.packer import default_packer  # noqa: E402


def in_process(packer: Any, payloads: list[dict[str, Any]], budget: int, start: int, n: int) -> dict[str, list[float]]:
    import orjson

    out: dict[str, list[float]] = {"pack": [], "pack+json": [], "pack+orjson": []}
    for i in range(start, start + n):
        p = payloads[i % len(payloads)]
        t0 = time.perf_counter()
        result = packer.pack(p["query"], p["chunks"], budget=budget).to_dict()
        t1 = time.perf_counter()
        json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode()
        t2 = time.perf_counter()
        orjson.dumps(result)
        t3 = time.perf_counter()
        out["pack"].append(t1 - t0)
        out["pack+json"].append(t2 - t0)
        out["pack+orjson"].append(t1 - t0 + t3 - t2)
    return out


def send(client: httpx.Client, url: str, bodies: list[bytes], start: int, n: int) -> None:
    for i in range(start, start + n):
        r = client.post(url + "/v1/pack", content=bodies[i % len(bodies)], headers={"content-type": "application/json"})
        if r.status_code != 200:
            raise SystemExit(f"{url} answered {r.status_code}: {r.text[:300]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--block", type=int, default=40)
    ap.add_argument("--sizes", default="20,200")
    ap.add_argument("--budget", type=int, default=4000)
    ap.add_argument("--pool", type=int, default=64)
    ap.add_argument("--data", help="the NQ file or its folder (default: $EDGEWISE_DATA, ../shared/data)")
    ap.add_argument("--baseline-src", help="another checkout's src folder: its server runs beside this one's")
    ap.add_argument("--tiny", action="store_true", help="2 rounds of 4 requests, 8 inputs, 20 chunks (a smoke test)")
    args = ap.parse_args(argv)
    if args.tiny:
        args.rounds, args.block, args.sizes, args.pool = 2, 4, "20", 8
    sizes = [int(x) for x in args.sizes.split(",")]
    path = data_path("nq-open-oracle-dev.jsonl.gz", args.data)
    pools = {n: inputs(path, n, args.pool, seed=n) for n in sizes}
    bodies = {n: [json.dumps({**p, "options": {"budget": args.budget}}).encode() for p in pools[n]] for n in sizes}
    packer = default_packer()
    tok = packer.tokenizer(packer.options)
    if getattr(tok, "speed_up", None) is not None:
        tok.speed_up()  # as edgewise serve does at start
    gc.collect()
    gc.freeze()  # as edgewise serve does after its warm-up: the inputs built here are not walked by every collection
    print(f"edgewise {edgewise.__version__}; Python {sys.version.split()[0]}; {os.cpu_count()} CPUs (shared with "
          f"other jobs); budget {args.budget}; {args.rounds} rounds x {args.block} requests per column, alternated; "
          f"pool of {args.pool} inputs; load average {os.getloadavg()[0]:.2f} before")
    servers = {"server": Server(1)}
    try:
        if args.baseline_src:
            servers["baseline"] = Server(1, pythonpath=args.baseline_src)
        rows = [measure(n, servers, pools[n], bodies[n], packer, args) for n in sizes]
    finally:
        for s in servers.values():
            s.stop()
    print()
    names = list(servers)
    head = ["chunks", "pack ms", "pack+json ms", "pack+orjson ms"] + [f"{s} ms" for s in names]
    head += [f"{s} / {b}" for s in names for b in ("pack", "pack+json", "pack+orjson")]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    for n, base, served in rows:
        cells = [str(n)] + [f"{base[k]:.3f}" for k in ("pack", "pack+json", "pack+orjson")]
        cells += [f"{served[s]:.3f}" for s in names]
        cells += [f"{served[s] / base[b]:.2f}×" for s in names for b in ("pack", "pack+json", "pack+orjson")]
        print("| " + " | ".join(cells) + " |")
    print(f"\nload average {os.getloadavg()[0]:.2f} after")
    return 0


def measure(n: int, servers: dict[str, Server], pool: list[dict[str, Any]], bodies: list[bytes], packer: Any,
            args: argparse.Namespace) -> tuple[int, dict[str, float], dict[str, float]]:
    nodelay = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    base: dict[str, list[float]] = {"pack": [], "pack+json": [], "pack+orjson": []}
    served: dict[str, list[float]] = {s: [] for s in servers}
    with httpx.Client(timeout=60, transport=nodelay) as client:
        in_process(packer, pool, args.budget, 0, len(pool))  # every input once everywhere: warm count caches
        for s in servers.values():
            send(client, s.url, bodies, 0, len(bodies))
            s.durations()
        at = 0
        for _ in range(args.rounds):
            for k, v in in_process(packer, pool, args.budget, at, args.block).items():
                base[k] += v
            for name, s in servers.items():
                send(client, s.url, bodies, at, args.block)
                time.sleep(0.05)  # the access log's lines are written
                served[name] += s.durations()
            at += args.block
    return (n, {k: statistics.median(v) * 1000 for k, v in base.items()},
            {k: statistics.median(v) for k, v in served.items()})


if __name__ == "__main__":
    sys.exit(main())
