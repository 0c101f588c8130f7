"""``edgewise batch``: rows per second on Ray Data and on a process pool, against a single-process loop.

Requests are built from the NaturalQuestions dev file (``--data``, default tests/data): row i asks
question i over N passages (the gold passages of rows i, i+1, ..., with retriever-like scores),
``--budget`` cl100k tokens (default 2,000), the default order and layout. For N = 20 and N = 200
chunks (``--rows20``/``--rows200`` rows), each way runs the same JSON Lines file:

- ``pack() loop``: ``Packer.pack`` on every row in this process, rows already parsed, nothing
  written: the packing alone;
- ``local xW``: ``edgewise.batch.run(engine="local", concurrency=W)``: read, pack, write Parquet;
  W = 1 runs in this process, W = 2 on a pool of spawned processes (their start-up included);
- ``ray xW``: ``engine="ray"`` with W Packer actors on a local Ray instance started once before
  (``ray.init`` timed apart, as "Ray start-up"); the job time includes starting the actors.

``rows/s`` = rows / wall seconds of the whole job; ``CPU s`` is this process's CPU time (the
workers' is not in it: for the pool and Ray it shows what the driver spends). Every output is
checked: one row per input row, no error. The machine is shared (2 cores): the load average is
printed before and after.

    .venv/bin/python benchmarks/batch.py > docs/bench/batch.txt
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "tests" / "data"


def passages(data: Path) -> list[dict]:
    path = data / "nq-open-oracle-dev.jsonl.gz" if data.is_dir() else data
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [{"question": r["question"], "title": r["ctxs"][0]["title"], "text": r["ctxs"][0]["text"]} for r in rows]


def write_requests(path: Path, nq: list[dict], rows: int, n: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(rows):
            chunks = [{"id": f"p{(i + k) % len(nq)}", "title": nq[(i + k) % len(nq)]["title"],
                       "text": nq[(i + k) % len(nq)]["text"], "score": round(1.0 - k / (2 * n), 4)} for k in range(n)]
            f.write(json.dumps({"id": f"q{i}", "query": nq[i % len(nq)]["question"] + "?", "chunks": chunks},
                               ensure_ascii=False) + "\n")


def check(summary, rows: int) -> None:
    if (summary.rows, summary.errors) != (rows, 0):
        raise SystemExit(f"{summary.engine} x{summary.concurrency}: {summary.rows} rows, {summary.errors} errors; "
                         f"expected {rows} rows, 0 errors")


def run_loop(path: Path, options) -> tuple[float, float]:
    from edgewise.packer import Packer

    with open(path, encoding="utf-8") as f:
        reqs = [json.loads(line) for line in f]
    packer = Packer(options)
    t0, c0 = time.perf_counter(), time.process_time()
    for r in reqs:
        packer.pack(r["query"], r["chunks"])
    return time.perf_counter() - t0, time.process_time() - c0


def run_engine(path: Path, out: Path, options, engine: str, workers: int, rows: int) -> tuple[float, float]:
    from edgewise.batch import run

    t0, c0 = time.perf_counter(), time.process_time()
    summary = run(path, out, options, engine=engine, concurrency=workers)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    check(summary, rows)
    return wall, cpu


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the NQ file or its folder (default tests/data)")
    p.add_argument("--rows20", type=int, default=10_000, help="requests of 20 chunks (default 10,000)")
    p.add_argument("--rows200", type=int, default=1_000, help="requests of 200 chunks (default 1,000)")
    p.add_argument("--budget", type=int, default=2000)
    p.add_argument("--ways", default="loop,local1,local2,ray1,ray2", help="comma-separated, of: loop, local1, "
                   "local2, ray1, ray2")
    a = p.parse_args(argv)
    from edgewise.options import PackOptions

    options = PackOptions(budget=a.budget)
    ways = [w.strip() for w in a.ways.split(",") if w.strip()]
    nq = passages(a.data)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs; "
          f"python {sys.version.split()[0]}", flush=True)
    ray_start = None
    if any(w.startswith("ray") for w in ways):
        import logging

        import ray

        t0 = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        ray_start = time.perf_counter() - t0
        print(f"Ray start-up (ray.init, local instance, 2 CPUs): {ray_start:.1f} s", flush=True)
    results: list[dict] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n, rows in ((20, a.rows20), (200, a.rows200)):
                if rows <= 0:
                    continue
                src = Path(tmp) / f"in-{n}.jsonl"
                write_requests(src, nq, rows, n)
                for way in ways:
                    if way == "loop":
                        wall, cpu = run_loop(src, options)
                        engine, workers = "loop", 1
                    else:
                        engine, workers = way[:-1], int(way[-1])
                        wall, cpu = run_engine(src, Path(tmp) / f"out-{n}-{way}", options, engine, workers, rows)
                    results.append({"chunks": n, "rows": rows, "way": way, "engine": engine, "workers": workers,
                                    "seconds": wall, "cpu": cpu, "rows_per_s": rows / wall})
                    print(f"  {n} chunks x {rows} rows, {way}: {wall:.1f} s", file=sys.stderr, flush=True)
    finally:
        if ray_start is not None:
            import ray

            ray.shutdown()
    names = {"loop": "pack() loop, 1 process", "local1": "local x1 (in process)", "local2": "local x2 (process pool)",
             "ray1": "ray x1 (actor)", "ray2": "ray x2 (actors)"}
    print()
    print("| chunks | rows | way | seconds | rows/s | driver CPU s |")
    print("| ---: | ---: | --- | ---: | ---: | ---: |")
    for r in results:
        print(f"| {r['chunks']} | {r['rows']:,} | {names[r['way']]} | {r['seconds']:.1f} | {r['rows_per_s']:,.0f} | "
              f"{r['cpu']:.1f} |")
    if ray_start is not None:
        print(f"\nRay start-up, apart from every ray row above: {ray_start:.1f} s")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return results


if __name__ == "__main__":
    main()
