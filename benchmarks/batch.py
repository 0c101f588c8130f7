"""``edgewise batch``: rows per second per worker, against two ``pack()`` loops in one process, and Ray Data.

Requests are built from the NaturalQuestions dev file (``--data``, default tests/data): row i asks
question i over N passages (the gold passages of rows i, i+1, ..., with retriever-like scores),
``--budget`` cl100k tokens (default 2,000), the default order and layout. For N = 20 and N = 200
chunks (``--rows20``/``--rows200`` rows), each way runs the same JSON Lines file, the ways
interleaved, ``--reps`` times (medians reported):

- ``(a) pack() loop``: ``Packer.pack`` on every row in this process, rows already parsed, nothing
  written: the packing alone (the baseline of the target);
- ``read + pack() loop``: ``json.loads`` of each line, then ``pack()``, nothing written;
- ``(b) user's loop``: the loop a user writes instead of ``edgewise batch``: read the file, ``json.loads``
  each line, ``pack()``, one output row of the same columns (:func:`edgewise.batch.schema`, the per-chunk
  column null, as by default), one Parquet file; its file is checked to hold the rows ``local x1`` writes;
- ``local x1``: ``edgewise.batch.run(engine="local")`` in this process: read, pack, write Parquet
  (the unit files, then the one result), the default columns; ``+ chunk records``: with
  ``chunk_records=True`` (the per-chunk column filled); ``Parquet input``: the same rows read from a
  Parquet file (one row group per unit);
- ``local x2``: a pool of 2 spawned workers (their start-up included), per worker = rows/s ÷ 2;
- ``ray xW``: ``engine="ray"`` with W Packer actors on a local Ray instance started once before
  (``ray.init`` timed apart).

Every in-process way starts with the tokenizer's count cache empty, as a new worker does. A way's
**steady** rate leaves out what a job pays once (starting workers or actors, planning, joining the
result): the rows of every unit but the first over the time from the first unit file written to the
last (the files' modification times, ``Summary.extra``); ``first unit`` is the seconds from the job's
start to its first unit file (start-up included). ``CPU rows/s`` is rows over the CPU seconds of the
processes that packed (this process, or the pool's workers, counted when they end; not measured for
Ray's actors): on a shared machine it is the steadier figure. Every output is checked: one row per
input row, no error row. The load average is printed before and after.

Then two more tables. **Where one worker's time goes**: ``local x1`` again, each of the job's own
functions timed where it runs (CPU time of this process, medians over ``--reps``), in ms per row
and as a multiple of the ``(a)`` loop's time per row measured beside it; the timers add about
1 µs per call. **Ray's own cost** (with the ``ray`` ways): the same Ray job with each unit's CPU (of
the packing thread, and of the whole actor process, Ray's own threads included) and wall time
recorded in the actor, giving the time until the first unit starts (starting the actors), the idle
time between two calls on an actor (Ray Data's cost per call), and the driver's CPU. Ray starts its
workers at nice 15 unless told otherwise; here they run at this process's nice value, as the pool's
workers do (``--ray-niceness 15`` measures Ray's default).

    .venv/bin/python benchmarks/batch.py --rows20 24000 --rows200 4800 --reps 3 > docs/bench/batch-per-worker-and-ray.txt
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "tests" / "data"
NAN = float("nan")


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


def write_parquet_twin(src: Path, dst: Path, rows_per_group: int) -> None:
    """The rows of ``src`` as a Parquet file, ``rows_per_group`` rows a row group (a unit each)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(src, encoding="utf-8") as f:
        table = pa.Table.from_pylist([json.loads(line) for line in f])
    pq.write_table(table, dst, row_group_size=rows_per_group)


def check(summary, rows: int) -> None:
    if (summary.rows, summary.errors) != (rows, 0):
        raise SystemExit(f"{summary.engine} x{summary.concurrency}: {summary.rows} rows, {summary.errors} errors; "
                         f"expected {rows} rows, 0 errors")


def cold(options) -> None:
    """Empty the job tokenizer's count cache: every in-process way starts as a new worker does."""
    from edgewise.packing.packer import tokenizer_spec
    from edgewise.tokens.tokenizers import get_tokenizer

    cache = getattr(get_tokenizer(tokenizer_spec(options)), "_cache", None)
    if cache is not None:
        cache.clear()


def run_loop(path: Path, options, parse: bool = False) -> tuple[float, float]:
    from edgewise.packing.packer import Packer

    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    reqs = None if parse else [json.loads(line) for line in lines]
    packer = Packer(options)
    cold(options)
    t0, c0 = time.perf_counter(), time.process_time()
    for r in reqs if reqs is not None else (json.loads(line) for line in lines):
        packer.pack(r["query"], r["chunks"])
    return time.perf_counter() - t0, time.process_time() - c0


def run_user_loop(path: Path, out: Path, options) -> tuple[float, float]:
    """(b): read, parse, pack and write the same columns, as a user writes it without ``edgewise batch``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from edgewise.batch import schema
    from edgewise.packing.debug import _FIELDS as DEBUG_FIELDS
    from edgewise.packing.packer import Packer

    packer = Packer(options)
    cold(options)
    t0, c0 = time.perf_counter(), time.process_time()
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            r = json.loads(line)
            p = packer.pack(r["query"], r["chunks"], **r.get("options", {}))
            d = p.debug_info
            row = {"index": i, "id": r.get("id", str(i)), "prompt": p.prompt, "messages": p.messages("openai")}
            row.update({name: getattr(d, name) for name in DEBUG_FIELDS if name != "chunks"})
            row.update(sections=list(d.sections.items()), chunks=None, error=None)
            rows.append(row)
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema()), out / "part-00000.parquet")
    return time.perf_counter() - t0, time.process_time() - c0


def run_engine(path: Path, out: Path, options, engine: str, workers: int, rows: int,
               chunk_records: bool = False) -> tuple[float, float, float, float]:
    import resource

    from edgewise.batch import run

    def cpu() -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return (kids.ru_utime + kids.ru_stime) if workers > 1 else (me.ru_utime + me.ru_stime)

    if engine == "local" and workers == 1:
        cold(options)
    t0, c0 = time.perf_counter(), cpu()
    summary = run(path, out, options, engine=engine, concurrency=workers, chunk_records=chunk_records,
                  rows_per_unit=max(1, rows // 20))
    wall, used = time.perf_counter() - t0, cpu() - c0
    check(summary, rows)
    steady = summary.extra.get("steady_rows_per_s") or NAN
    first = summary.extra.get("first_unit_seconds")
    return wall, used if engine == "local" else NAN, steady, NAN if first is None else first


WAYS = {"loop": "(a) pack() loop, 1 process (rows parsed, no I/O)", "readloop": "read + pack() loop, 1 process",
        "userloop": "(b) user's loop: read + pack + write the same columns", "local1": "local x1: read + pack + write Parquet",
        "local1rec": "local x1 + chunk records", "local1pq": "local x1, Parquet input",
        "local2": "local x2: process pool, per worker", "ray1": "ray x1: one actor", "ray2": "ray x2: per actor"}


def one(way: str, src: Path, out: Path, options, rows: int) -> tuple[float, float, float, float]:
    if way in ("loop", "readloop"):
        return (*run_loop(src, options, parse=way == "readloop"), NAN, NAN)
    if way == "userloop":
        return (*run_user_loop(src, out, options), NAN, NAN)
    if way == "local1pq":
        return run_engine(src.with_suffix(".parquet"), out, options, "local", 1, rows)
    engine, workers = ("local", 1) if way == "local1rec" else (way[:-1], int(way[-1]))
    return run_engine(src, out, options, engine, workers, rows, chunk_records=way == "local1rec")


def same_rows(tmp: Path, n: int) -> None:
    """(b)'s file holds the rows ``local x1`` writes (so the two loops do the same work)."""
    import pyarrow.parquet as pq

    b, batch = tmp / f"out-{n}-userloop-0" / "part-00000.parquet", tmp / f"out-{n}-local1-0" / "part-00000.parquet"
    if b.exists() and batch.exists() and not pq.read_table(b).equals(pq.read_table(batch)):
        raise SystemExit(f"{n} chunks: the user's loop wrote other rows than edgewise batch")


def measure(tmp: Path, nq: list[dict], n: int, rows: int, ways: list[str], reps: int, options) -> list[dict]:
    """Every way on the same file (20 units for the batch ways), interleaved ``reps`` times; medians."""
    src = tmp / f"in-{n}.jsonl"
    write_requests(src, nq, rows, n)
    if "local1pq" in ways:
        write_parquet_twin(src, src.with_suffix(".parquet"), max(1, rows // 20))
    got: dict[str, list[tuple[float, float, float, float]]] = {w: [] for w in ways}
    for rep in range(reps):
        for way in ways:
            got[way].append(one(way, src, tmp / f"out-{n}-{way}-{rep}", options, rows))
            print(f"  {n} chunks x {rows} rows, {way}, rep {rep + 1}: {got[way][-1][0]:.1f} s", file=sys.stderr,
                  flush=True)
    same_rows(tmp, n)
    out = []
    for way, runs in got.items():
        workers = 2 if way.endswith("2") else 1

        def med(i: int, runs: list = runs) -> float:
            values = [r[i] for r in runs if r[i] == r[i]]
            return statistics.median(values) if values else NAN

        out.append({"chunks": n, "rows": rows, "way": way, "workers": workers, "seconds": med(0),
                    "rows_per_s": rows / med(0) / workers, "cpu_rows_per_s": rows / med(1),
                    "steady_rows_per_s": med(2) / workers, "first_unit_s": med(3)})
    return out


# -- where one worker's time goes --------------------------------------------------------------------

STAGES = {"plan": "plan the units (the input read once)", "open": "open the job folder (manifest)",
          "read": "read a line (readline)", "parse": "parse the row (orjson, and its checks)",
          "row": "row checks (read_row)", "pack": "pack()", "records": "per-chunk records (DebugInfo.chunks, for dropped)",
          "output": "output row, the rest (packed_row)", "arrow": "Arrow conversion (to_table, 32 rows at a time)",
          "ipc": "unit file written (Arrow IPC)", "join": "units joined into the Parquet file (finish)",
          "other": "the rest (loop, concatenating a unit, freeing rows)"}


class Timers:
    """CPU seconds per stage, from wrappers put around the job's own functions for one run."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = dict.fromkeys(STAGES, 0.0)
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, stage: str, minus: tuple[str, ...] = ()) -> None:
        inner = getattr(owner, name)
        spent, clock = self.spent, time.process_time

        def timed(*args: Any, **kwargs: Any) -> Any:
            before = [spent[m] for m in minus]
            t0 = clock()
            try:
                return inner(*args, **kwargs)
            finally:  # time spent in a nested stage is that stage's, not this one's
                spent[stage] += clock() - t0 - sum(spent[m] - b for m, b in zip(minus, before))

        self._undo.append((owner, name, inner))
        setattr(owner, name, timed)

    def wrap_generator(self, owner: Any, name: str, stage: str, minus: tuple[str, ...]) -> None:
        inner = getattr(owner, name)
        spent, clock = self.spent, time.process_time

        def timed(*args: Any, **kwargs: Any) -> Any:
            it = inner(*args, **kwargs)
            while True:
                before = [spent[m] for m in minus]
                t0 = clock()
                try:
                    item = next(it)
                except StopIteration:
                    return
                finally:
                    spent[stage] += clock() - t0 - sum(spent[m] - b for m, b in zip(minus, before))
                yield item

        self._undo.append((owner, name, inner))
        setattr(owner, name, timed)

    def wrap_property(self, owner: type, name: str, stage: str) -> None:
        inner = getattr(owner, name)
        spent, clock = self.spent, time.process_time

        def timed(obj: Any) -> Any:
            t0 = clock()
            try:
                return inner.fget(obj)
            finally:
                spent[stage] += clock() - t0

        self._undo.append((owner, name, inner))
        setattr(owner, name, property(timed))

    def undo(self) -> None:
        for owner, name, inner in reversed(self._undo):
            setattr(owner, name, inner)


def staged_run(src: Path, out: Path, options, rows: int) -> dict[str, float]:
    """``local x1`` with each stage timed in place; CPU seconds per stage (``other``: the rest)."""
    from edgewise.batch import job, local, run, units
    from edgewise.batch import rows as rowmod
    from edgewise.packing.debug import DebugInfo
    from edgewise.packing.packer import Packer

    t = Timers()
    t.wrap(units, "plan_job", "plan")
    t.wrap(job.Job, "open", "open")
    t.wrap(units, "_parse", "parse")
    t.wrap_generator(local, "iter_unit", "read", minus=("parse",))
    t.wrap(rowmod, "read_row", "row")
    t.wrap(Packer, "pack", "pack")
    t.wrap_property(DebugInfo, "chunks", "records")
    t.wrap(rowmod, "packed_row", "output", minus=("records",))
    t.wrap(local, "to_table", "arrow")
    t.wrap(local, "write_unit", "ipc")
    t.wrap(job.Job, "finish", "join")
    try:
        cold(options)
        c0 = time.process_time()
        summary = run(src, out, options, engine="local", rows_per_unit=max(1, rows // 20))
        total = time.process_time() - c0
    finally:
        t.undo()
    check(summary, rows)
    t.spent["other"] = total - sum(v for k, v in t.spent.items() if k != "other")
    return {**t.spent, "total": total}


def stages(tmp: Path, sizes: list[tuple[int, int]], reps: int, options) -> list[dict]:
    """The stage times of ``local x1`` at each size, interleaved with the (a) loop, ``reps`` times; medians."""
    out = []
    for n, rows in sizes:
        src = tmp / f"in-{n}.jsonl"
        runs, loops = [], []
        for rep in range(reps):
            loops.append(run_loop(src, options)[1])
            runs.append(staged_run(src, tmp / f"stages-{n}-{rep}", options, rows))
        row = {k: statistics.median(r[k] for r in runs) / rows for k in runs[0]}
        out.append({"chunks": n, "rows": rows, "loop": statistics.median(loops) / rows, **row})
    return out


def _stage_table(results: list[dict]) -> None:
    if not results:
        return
    heads = " | ".join(f"{r['chunks']} chunks: ms/row | x (a)" for r in results)
    print(f"\nWhere one worker's time goes (local x1, CPU ms per row, medians):\n\n| stage | {heads} |")
    print("| --- |" + " ---: | ---: |" * len(results))

    def line(label: str, key: str) -> None:
        cells = " | ".join(f"{r[key] * 1e3:.3f} | {r[key] / r['loop']:.2f}" for r in results)
        print(f"| {label} | {cells} |")

    line("(a) pack() loop, rows parsed (the reference)", "loop")
    for key, label in STAGES.items():
        line(label, key)
    line("**total, local x1**", "total")


# -- Ray's own cost ----------------------------------------------------------------------------------

def ray_costs(tmp: Path, sizes: list[tuple[int, int]], workers: list[int], reps: int, options) -> list[dict]:
    """Each Ray way once more per rep, the actor recording each unit's CPU and wall time: medians of
    the time until the first unit starts, the idle time between two units on one actor, the CPU
    per unit, and the driver's CPU."""
    import cloudpickle

    from edgewise.batch import ray_data, run

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    out = []
    for n, rows in sizes:
        for w in workers:
            got = []
            for rep in range(reps):
                log = tmp / f"ray-units-{n}-{w}-{rep}.jsonl"
                timed = _timed_actor(ray_data.PackUnits, str(log))
                ray_data.PackUnits, plain = timed, ray_data.PackUnits
                try:
                    t0, c0 = time.time(), time.process_time()
                    summary = run(tmp / f"in-{n}.jsonl", tmp / f"ray-costs-{n}-{w}-{rep}", options, engine="ray",
                                  concurrency=w, rows_per_unit=max(1, rows // 20))
                    wall, driver = time.time() - t0, time.process_time() - c0
                finally:
                    ray_data.PackUnits = plain
                check(summary, rows)
                got.append(_unit_costs(log, t0, wall, driver))
            out.append({"chunks": n, "rows": rows, "workers": w,
                        **{k: statistics.median(g[k] for g in got) for k in got[0]}})
    return out


def _timed_actor(base: type, log: str) -> type:
    class TimedPackUnits(base):
        """PackUnits that appends each unit's pid, CPU and wall time to ``log``."""

        def __call__(self, batch: Any) -> Any:
            import pyarrow as pa

            from edgewise.batch.local import write_packed_unit

            written = []
            for item in batch.to_pylist():
                c0, p0, w0 = time.thread_time(), time.process_time(), time.time()
                written.append(write_packed_unit(self.packer, item["target"], json.loads(item["unit"]),
                                                 chunk_records=self.chunk_records))
                with open(log, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"pid": os.getpid(), "cpu": time.thread_time() - c0,
                                        "process_cpu": time.process_time() - p0, "start": w0, "end": time.time(),
                                        "rows": written[-1], "nice": os.nice(0)}) + "\n")
            return pa.table({"rows": pa.array(written, pa.int64())})

    return TimedPackUnits


def _unit_costs(log: Path, t0: float, wall: float, driver: float) -> dict[str, float]:
    units = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    by_actor: dict[int, list[dict]] = {}
    for u in sorted(units, key=lambda u: u["start"]):
        by_actor.setdefault(u["pid"], []).append(u)
    gaps = [b["start"] - a["end"] for us in by_actor.values() for a, b in zip(us, us[1:])]
    calls = [g for g in gaps if g > 0.002]  # between two calls (within a call the next unit starts at once)
    rows = statistics.median(u["rows"] for u in units)
    return {"wall": wall, "first_start": min(u["start"] for u in units) - t0, "driver_cpu": driver,
            "unit_cpu_ms_per_row": statistics.median(u["cpu"] / u["rows"] for u in units) * 1e3,
            "process_cpu_ms_per_row": statistics.median(u["process_cpu"] / u["rows"] for u in units) * 1e3,
            "nice": statistics.median(u["nice"] for u in units),
            "unit_wall_ms_per_row": statistics.median((u["end"] - u["start"]) / u["rows"] for u in units) * 1e3,
            "gap_ms": statistics.median(calls) * 1e3 if calls else 0.0, "calls_gaps": len(calls), "unit_rows": rows,
            "idle_share": sum(gaps) / max(1e-9, max(u["end"] for u in units) - min(u["start"] for u in units))}


def _ray_table(results: list[dict]) -> None:
    if not results:
        return
    print("\nRay's own cost (the ray ways once more, each unit timed in its actor; medians):\n")
    print("| chunks | actors | actors' nice | job s | until the first unit starts, s | actor CPU ms/row, packing thread | "
          "actor CPU ms/row, whole process | actor wall ms/row | idle between two calls on an actor, ms | "
          "idle share of the actors' time | driver CPU s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        print(f"| {r['chunks']} | {r['workers']} | {r['nice']:.0f} | {r['wall']:.1f} | {r['first_start']:.1f} | "
              f"{r['unit_cpu_ms_per_row']:.2f} | {r['process_cpu_ms_per_row']:.2f} | {r['unit_wall_ms_per_row']:.2f} | "
              f"{r['gap_ms']:.0f} | {r['idle_share']:.0%} | {r['driver_cpu']:.2f} |")


# -- the run -----------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the NQ file or its folder (default tests/data)")
    p.add_argument("--rows20", type=int, default=3_000, help="requests of 20 chunks (default 3,000)")
    p.add_argument("--rows200", type=int, default=300, help="requests of 200 chunks (default 300)")
    p.add_argument("--budget", type=int, default=2000)
    p.add_argument("--reps", type=int, default=2, help="interleaved repetitions of every way (default 2)")
    p.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, of: {', '.join(WAYS)}")
    p.add_argument("--no-stages", action="store_true", help="leave out the table of where one worker's time goes")
    p.add_argument("--ray-niceness", type=int, default=None,
                   help="the nice value of Ray's workers (RAY_worker_niceness; default: this process's, as the "
                        "pool's workers have; Ray's own default is 15)")
    a = p.parse_args(argv)
    from edgewise.options import PackOptions

    options = PackOptions(budget=a.budget)
    ways = [w.strip() for w in a.ways.split(",") if w.strip()]
    nq = passages(a.data)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs; "
          f"python {sys.version.split()[0]}", flush=True)
    ray_start = _start_ray(a.ray_niceness) if any(w.startswith("ray") for w in ways) else None
    results: list[dict] = []
    staged: list[dict] = []
    costs: list[dict] = []
    sizes = [(n, rows) for n, rows in ((20, a.rows20), (200, a.rows200)) if rows > 0]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n, rows in sizes:
                results += measure(Path(tmp), nq, n, rows, ways, a.reps, options)
            if not a.no_stages:
                staged = stages(Path(tmp), sizes, a.reps, options)
            ray_ways = [int(w[-1]) for w in ways if w.startswith("ray")]
            if ray_ways:
                costs = ray_costs(Path(tmp), sizes, ray_ways, a.reps, options)
    finally:
        if ray_start is not None:
            import ray

            ray.shutdown()
    _table(results, ray_start)
    _stage_table(staged)
    _ray_table(costs)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return results


def _start_ray(niceness: int | None) -> float:
    import logging

    import ray

    nice = os.nice(0) if niceness is None else niceness
    os.environ["RAY_worker_niceness"] = str(nice)  # read by the instance ray.init starts, and its workers
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    took = time.perf_counter() - t0
    print(f"Ray start-up (ray.init, local instance, 2 CPUs, workers at nice {nice}; this process at nice "
          f"{os.nice(0)}): {took:.1f} s", flush=True)
    return took


def _table(results: list[dict], ray_start: float | None) -> None:
    def f(x: float) -> str:
        return "" if x != x else f"{x:,.0f}"

    def ratio(r: dict, base: dict[int, float]) -> str:
        return f"{r['rows_per_s'] / base[r['chunks']]:.2f}x" if r["chunks"] in base else ""

    loop = {r["chunks"]: r["rows_per_s"] for r in results if r["way"] == "loop"}
    user = {r["chunks"]: r["rows_per_s"] for r in results if r["way"] == "userloop"}
    print()
    print("| chunks | rows | way | seconds | rows/s per worker | / (a) pack() loop | / (b) user's loop | "
          "steady rows/s per worker | first unit, s | CPU rows/s |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        first = "" if r["first_unit_s"] != r["first_unit_s"] else f"{r['first_unit_s']:.2f}"
        print(f"| {r['chunks']} | {r['rows']:,} | {WAYS[r['way']]} | {r['seconds']:.1f} | {f(r['rows_per_s'])} | "
              f"{ratio(r, loop)} | {ratio(r, user)} | {f(r['steady_rows_per_s'])} | {first} | {f(r['cpu_rows_per_s'])} |")
    _ratios(results)
    if ray_start is not None:
        print(f"\nRay start-up, apart from every ray row above: {ray_start:.1f} s")


def _ratios(results: list[dict]) -> None:
    """The targets' ratios: local x1 against (a) and (b), by rows/s and by CPU; Ray against the pool, steady."""
    at = {(r["chunks"], r["way"]): r for r in results}
    lines = []
    for n in sorted({r["chunks"] for r in results}):
        one = at.get((n, "local1"))
        for base in ("loop", "userloop"):
            b = at.get((n, base))
            if one and b:
                lines.append(f"{n} chunks, local x1 / {WAYS[base].split(' ', 1)[0]}: {one['rows_per_s'] / b['rows_per_s']:.2f}x "
                             f"by rows/s, {one['cpu_rows_per_s'] / b['cpu_rows_per_s']:.2f}x by CPU")
        for w in (1, 2):
            ray, pool = at.get((n, f"ray{w}")), at.get((n, f"local{w}"))
            if ray and pool:
                lines.append(f"{n} chunks, ray x{w} / local x{w}, steady per worker: "
                             f"{ray['steady_rows_per_s'] / pool['steady_rows_per_s']:.2f}x")
    if lines:
        print("\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
