"""``edgewise batch``: rows per second per worker, against a ``pack()`` loop in one process, and Ray Data.

Requests are built from the NaturalQuestions dev file (``--data``, default tests/data): row i asks
question i over N passages (the gold passages of rows i, i+1, ..., with retriever-like scores),
``--budget`` cl100k tokens (default 2,000), the default order and layout. For N = 20 and N = 200
chunks (``--rows20``/``--rows200`` rows), each way runs the same JSON Lines file, the ways
interleaved, ``--reps`` times (medians reported):

- ``pack() loop``: ``Packer.pack`` on every row in this process, rows already parsed, nothing
  written: the packing alone;
- ``read + pack() loop``: the loop a user writes: ``json.loads`` of each line, then ``pack()``;
- ``local x1``: ``edgewise.batch.run(engine="local")`` in this process: read, pack, write Parquet
  (the unit files, then the one result), the default columns; ``+ chunk records``: with
  ``chunk_records=True`` (the per-chunk column filled);
- ``local x2``: a pool of 2 spawned workers (their start-up included), per worker = rows/s ÷ 2;
- ``ray xW``: ``engine="ray"`` with W Packer actors on a local Ray instance started once before
  (``ray.init`` timed apart). Its **steady** rate leaves out what a job pays once (starting the
  actors, planning, joining the result): the rows of every unit but the first over the time from
  the first unit file written to the last (the files' modification times, ``Summary.extra``); the
  pool ways get the same steady figure, so the two compare like for like.

``CPU rows/s`` is rows over the CPU seconds of the processes that packed (this process, or the
pool's workers, counted when they end; not measured for Ray's actors): on a shared machine it is
the steadier figure. Every output is checked: one row per input row, no error row. The load
average is printed before and after.

    .venv/bin/python benchmarks/batch.py > docs/bench/batch-throughput.txt
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


def run_loop(path: Path, options, parse: bool = False) -> tuple[float, float]:
    from edgewise.packing.packer import Packer

    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    reqs = None if parse else [json.loads(line) for line in lines]
    packer = Packer(options)
    t0, c0 = time.perf_counter(), time.process_time()
    for r in reqs if reqs is not None else (json.loads(line) for line in lines):
        packer.pack(r["query"], r["chunks"])
    return time.perf_counter() - t0, time.process_time() - c0


def run_engine(path: Path, out: Path, options, engine: str, workers: int, rows: int,
               chunk_records: bool = False) -> tuple[float, float, float]:
    import resource

    from edgewise.batch import run

    def cpu() -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return (kids.ru_utime + kids.ru_stime) if workers > 1 else (me.ru_utime + me.ru_stime)

    t0, c0 = time.perf_counter(), cpu()
    summary = run(path, out, options, engine=engine, concurrency=workers, chunk_records=chunk_records,
                  rows_per_unit=max(1, rows // 20))
    wall, used = time.perf_counter() - t0, cpu() - c0
    check(summary, rows)
    steady = summary.extra.get("steady_rows_per_s") or float("nan")
    return wall, used if engine == "local" else float("nan"), steady


WAYS = {"loop": "pack() loop, 1 process (rows parsed, no I/O)", "readloop": "read + pack() loop, 1 process",
        "local1": "local x1: read + pack + write Parquet", "local1rec": "local x1 + chunk records",
        "local2": "local x2: process pool, per worker", "ray1": "ray x1: one actor", "ray2": "ray x2: per actor"}


def one(way: str, src: Path, out: Path, options, rows: int) -> tuple[float, float, float]:
    if way in ("loop", "readloop"):
        return (*run_loop(src, options, parse=way == "readloop"), float("nan"))
    engine, workers = ("local", 1) if way == "local1rec" else (way[:-1], int(way[-1]))
    return run_engine(src, out, options, engine, workers, rows, chunk_records=way == "local1rec")


def measure(tmp: Path, nq: list[dict], n: int, rows: int, ways: list[str], reps: int, options) -> list[dict]:
    """Every way on the same file (20 units for the batch ways), interleaved ``reps`` times; medians."""
    import statistics

    src = tmp / f"in-{n}.jsonl"
    write_requests(src, nq, rows, n)
    got: dict[str, list[tuple[float, float, float]]] = {w: [] for w in ways}
    for rep in range(reps):
        for way in ways:
            got[way].append(one(way, src, tmp / f"out-{n}-{way}-{rep}", options, rows))
            print(f"  {n} chunks x {rows} rows, {way}, rep {rep + 1}: {got[way][-1][0]:.1f} s", file=sys.stderr,
                  flush=True)
    out = []
    for way, runs in got.items():
        workers = 2 if way.endswith("2") else 1

        def med(i: int, runs: list = runs) -> float:
            values = [r[i] for r in runs if r[i] == r[i]]
            return statistics.median(values) if values else float("nan")

        out.append({"chunks": n, "rows": rows, "way": way, "workers": workers, "seconds": med(0),
                    "rows_per_s": rows / med(0) / workers, "cpu_rows_per_s": rows / med(1),
                    "steady_rows_per_s": med(2) / workers})
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the NQ file or its folder (default tests/data)")
    p.add_argument("--rows20", type=int, default=3_000, help="requests of 20 chunks (default 3,000)")
    p.add_argument("--rows200", type=int, default=300, help="requests of 200 chunks (default 300)")
    p.add_argument("--budget", type=int, default=2000)
    p.add_argument("--reps", type=int, default=2, help="interleaved repetitions of every way (default 2)")
    p.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, of: {', '.join(WAYS)}")
    a = p.parse_args(argv)
    from edgewise.options import PackOptions

    options = PackOptions(budget=a.budget)
    ways = [w.strip() for w in a.ways.split(",") if w.strip()]
    nq = passages(a.data)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs; "
          f"python {sys.version.split()[0]}", flush=True)
    ray_start = _start_ray() if any(w.startswith("ray") for w in ways) else None
    results: list[dict] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n, rows in ((20, a.rows20), (200, a.rows200)):
                if rows > 0:
                    results += measure(Path(tmp), nq, n, rows, ways, a.reps, options)
    finally:
        if ray_start is not None:
            import ray

            ray.shutdown()
    _table(results, ray_start)
    return results


def _start_ray() -> float:
    import logging

    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    took = time.perf_counter() - t0
    print(f"Ray start-up (ray.init, local instance, 2 CPUs): {took:.1f} s", flush=True)
    return took


def _table(results: list[dict], ray_start: float | None) -> None:
    def f(x: float) -> str:
        return "" if x != x else f"{x:,.0f}"

    base = {(r["chunks"]): r["rows_per_s"] for r in results if r["way"] == "loop"}
    print()
    print("| chunks | rows | way | seconds | rows/s per worker | / pack() loop | steady rows/s per worker | CPU rows/s |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        ratio = f"{r['rows_per_s'] / base[r['chunks']]:.2f}x" if r["chunks"] in base else ""
        print(f"| {r['chunks']} | {r['rows']:,} | {WAYS[r['way']]} | {r['seconds']:.1f} | {f(r['rows_per_s'])} | {ratio} | "
              f"{f(r['steady_rows_per_s'])} | {f(r['cpu_rows_per_s'])} |")
    if ray_start is not None:
        print(f"\nRay start-up, apart from every ray row above: {ray_start:.1f} s")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
