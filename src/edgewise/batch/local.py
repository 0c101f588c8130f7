"""Packing units of rows, and the plain process-pool engine (no Ray).

A worker holds one :class:`~edgewise.packing.packer.Packer` (tokenizer and scorer models loaded once) and
packs a unit at a time (:func:`pack_unit`). Before packing a unit, the texts its rows need embedded
by the job's embedding scorer (``dense``, ``hybrid``...) go through the model in one call, so the
ONNX runs see full batches across rows; each row's pack then finds its vectors in the cache.
:func:`run_local` runs the units a job has not written yet on a pool of ``concurrency`` processes
(in this process for 1), each unit into its own file of the job's folder, then joins them into one
Parquet file, rows in input order (:mod:`edgewise.batch.job`). The pool's workers end with the
process that started them (:mod:`edgewise.batch.lifeline`); Ctrl-C or SIGTERM stop them and say
how to resume.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EdgewiseError, InputError
from .job import RESUME_HINT, Job, write_unit
from .rows import error_row, pack_row, read_row, to_table
from .units import LineError, iter_unit


@dataclass
class Summary:
    """What a batch job did: rows written, rows with an error, the files, and how long it took."""

    engine: str
    rows: int
    errors: int
    files: list[str]
    seconds: float
    startup_seconds: float = 0.0
    concurrency: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "rows": self.rows, "errors": self.errors, "files": self.files,
                "seconds": round(self.seconds, 3), "startup_seconds": round(self.startup_seconds, 3),
                "concurrency": self.concurrency, "resumed_rows": self.extra.get("resumed_rows", 0)}


def warm(packer: Any, rows: Sequence[tuple[int, Any, bool]]) -> int:
    """Embed, in one model call, what the rows packed with the packer's own scorer will score; returns
    how many texts were handed to the model (0 when the scorer is not an embedding scorer)."""
    from ..chunk import normalize
    from ..score.ranking import scored_text

    scorer = packer.scorer(packer.options)
    if scorer is None or not callable(getattr(scorer, "embed", None)):
        return 0
    texts: dict[str, None] = {}
    for index, obj, from_arrow in rows:
        try:
            _, query, chunks, options = read_row(obj, index, from_arrow=from_arrow)
            if "scorer" in options or not isinstance(query, str):
                continue
            unique, _ = normalize(chunks)
        except Exception:  # noqa: BLE001 - packing the row reports it
            continue
        if packer.options.rescore or options.get("rescore") or any(c.score is None for c in unique):
            texts[query] = None
            texts.update(dict.fromkeys(scored_text(c) for c in unique))
    if texts:
        scorer.embed(list(texts))
    return len(texts)


#: rows turned into Arrow at a time: a worker holds this many packed rows as Python objects, not a unit's
ARROW_BATCH = 32


def pack_unit(packer: Any, unit: dict[str, Any], *, chunk_records: bool = False) -> Any:
    """Read and pack one unit: an Arrow table of its output rows, in input order.

    Rows are read, packed and turned into Arrow a few at a time (:data:`ARROW_BATCH`), so the
    Python objects alive at once stay few (a unit's worth of them made the garbage collector's
    passes cost more than the packing). With an embedding scorer the unit is read whole first, so
    its texts go through the model in one call (:func:`warm`).
    """
    import pyarrow as pa

    rows: Any = iter_unit(unit)
    if _embeds(packer):
        rows = list(rows)
        warm(packer, [r for r in rows if not isinstance(r[1], LineError)])
    path = unit["path"]  # error cells name the file and the row
    tables, pending = [], []
    for index, obj, from_arrow in rows:
        if isinstance(obj, LineError):
            pending.append(error_row(index, str(index) if obj.id is None else obj.id, obj.message))
        else:
            pending.append(pack_row(packer, index, obj, from_arrow=from_arrow, chunk_records=chunk_records, path=path))
        if len(pending) == ARROW_BATCH:
            tables.append(to_table(pending, path=path))
            pending = []
    if pending or not tables:
        tables.append(to_table(pending, path=path))
    return pa.concat_tables(tables).combine_chunks()


def _embeds(packer: Any) -> bool:
    scorer = packer.scorer(packer.options)
    return scorer is not None and callable(getattr(scorer, "embed", None))


def write_packed_unit(packer: Any, target: str | Path, unit: dict[str, Any], *, chunk_records: bool = False) -> int:
    """Pack one unit and write its rows to ``target`` (whole or not at all); returns its rows."""
    table = pack_unit(packer, unit, chunk_records=chunk_records)
    write_unit(Path(target), table)
    return table.num_rows


_WORKER: Any = None
_CHUNK_RECORDS = False


def _init_worker(options: Any, chunk_records: bool, parent: int) -> None:
    global _WORKER, _CHUNK_RECORDS
    from ..packing.packer import Packer
    from .lifeline import die_with_parent

    die_with_parent(parent)
    _WORKER, _CHUNK_RECORDS = Packer(options), chunk_records


def _run_unit(target: str, unit: dict[str, Any]) -> int:
    return write_packed_unit(_WORKER, target, unit, chunk_records=_CHUNK_RECORDS)


def _noop(_: int) -> int:
    return os.getpid()


def run_local(job: Job, options: Any = None, *, concurrency: int = 1, chunk_records: bool = False) -> Summary:
    """Pack the units ``job`` has not written yet on ``concurrency`` processes (1: in this process),
    then join them into its ``part-00000.parquet``. Stopped (Ctrl-C, SIGTERM) or with a worker lost,
    it stops the workers and says how to resume; what is written stays."""
    from ..packing.packer import Packer

    if concurrency < 1:
        raise InputError(f"concurrency must be >= 1, but got {concurrency}")
    todo = job.todo()
    resumed = sum(u["rows"] for i, u in enumerate(job.units) if i not in set(todo))
    t0 = time.perf_counter()
    startup = 0.0
    with stopping(job):
        if concurrency == 1:
            packer = Packer(options) if todo else None
            for i in todo:
                write_packed_unit(packer, job.unit_path(i), job.units[i], chunk_records=chunk_records)
        elif todo:
            startup = _on_pool(job, todo, options, concurrency, chunk_records)
    rows, errors = job.finish()
    summary = Summary("local", rows, errors, job.files, time.perf_counter() - t0, startup, concurrency)
    summary.extra.update(resumed_rows=resumed, steady_rows_per_s=job.steady, first_unit_seconds=job.first_unit)
    return summary


def _on_pool(job: Job, todo: list[int], options: Any, concurrency: int, chunk_records: bool) -> float:
    """Run the units ``todo`` of ``job`` on a pool of spawned workers; returns their start-up seconds."""
    import multiprocessing
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(concurrency, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(options, chunk_records, os.getpid()))
    try:
        s0 = time.perf_counter()
        list(pool.map(_noop, range(concurrency)))  # the workers are up and their Packers built
        startup = time.perf_counter() - s0
        futures = [pool.submit(_run_unit, str(job.unit_path(i)), job.units[i]) for i in todo]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for f in done:
            f.result()
        return startup
    except BrokenProcessPool:
        raise BatchStopped(f"a batch worker died (killed, or out of memory): {job.written()} of {len(job.units)} "
                           f"units are written in {str(job.out)!r}; {RESUME_HINT}") from None
    finally:
        _stop(pool)


def _stop(pool: Any) -> None:
    """Shut the pool down now: queued units cancelled, running workers killed (what they were writing
    is a temporary file, removed on resume)."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        if process.is_alive():
            process.kill()
    pool.shutdown(wait=True, cancel_futures=True)


class BatchStopped(EdgewiseError):
    """A batch job stopped before its end (a worker lost): what is written stays, ``--resume`` finishes it."""


class Stopped(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a batch job; the message says how far it got and how to resume."""


@contextmanager
def stopping(job: Job) -> Iterator[None]:
    """SIGTERM stops the job like Ctrl-C; either raises :class:`Stopped` saying how to resume."""
    import signal
    import threading

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, on_term) if main else None
    try:
        yield
    except KeyboardInterrupt as exc:
        what = "SIGTERM" if str(exc) == "SIGTERM" else "Ctrl-C"
        raise Stopped(f"stopped ({what}): {job.written()} of {len(job.units)} units are written in "
                      f"{str(job.out)!r}; {RESUME_HINT}") from None
    finally:
        if main:
            signal.signal(signal.SIGTERM, old)
