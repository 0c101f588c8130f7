"""Batch packing: JSON Lines or Parquet rows of ``{query, chunks, options?, id?}`` in, Parquet out.

One output row per input row, in one schema (:func:`edgewise.batch.rows.schema`): ``index``,
``id``, the prompt, its messages, the debug info as typed columns, and ``error`` (a row that
cannot be packed, or holds a value Parquet cannot store, is reported there, never dropped, naming
the input file and the row, and the job goes on). The result appears whole or not at all, and a job
that stopped is finished with ``resume=True`` (:mod:`edgewise.batch.job`). One job at a time writes
an output folder: a second one (a new job or a resume) is refused at once, naming the job that holds
it (:mod:`edgewise.batch.lock`). Two engines run the same per-row code: Ray Data (``engine="ray"``,
:mod:`edgewise.batch.ray_data`, on a cluster or a local Ray instance) and a plain process pool
(``engine="local"``). ``auto`` takes Ray when given a cluster address and the pool otherwise: on
one machine the pool finished every job measured sooner, and Ray adds its start-up (BENCHMARKS.md,
"Batch"; raw: docs/bench/batch-per-worker-and-ray.txt).

>>> import tempfile, os, pyarrow.parquet as pq
>>> d = tempfile.mkdtemp(); src = os.path.join(d, "in.jsonl")
>>> _ = open(src, "w").write('{"id": "a", "query": "capital?", "chunks": ["Paris.", "Rome."]}\\n{"query": 1, "chunks": []}\\n')
>>> summary = run(src, os.path.join(d, "out"), tokenizer="words", engine="local")
>>> summary.rows, summary.errors
(2, 1)
>>> rows = pq.read_table(summary.files[0], columns=["id", "prompt_tokens", "error"]).to_pylist()
>>> rows[0], rows[1]["id"], rows[1]["error"].replace(src, "in.jsonl")
({'id': 'a', 'prompt_tokens': 194, 'error': None}, '1', 'InputError: in.jsonl row 1: query must be a string, but got int')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InputError
from .local import Summary, run_local
from .rows import packed_dict, schema

__all__ = ["ENGINES", "Summary", "choose_engine", "packed_dict", "run", "schema"]

ENGINES = ("auto", "ray", "local")


def choose_engine(engine: str, rows: int, address: str | None) -> str:
    """The engine ``auto`` stands for: Ray when a cluster address is given, the process pool otherwise.

    Measured on one machine (BENCHMARKS.md, "Batch"), the pool beat a local Ray instance at every
    input size measured, before counting Ray's start-up: Ray pays off by adding machines,
    which only an address brings. ``rows`` is the input's size, for the record of the choice.

    >>> choose_engine("auto", 10**6, None), choose_engine("auto", 10, "ray://head:10001"), choose_engine("local", 1, None)
    ('local', 'ray', 'local')
    """
    if engine not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, but got {engine!r}")
    if engine == "local" and address is not None:
        raise InputError(f"engine 'local' runs on this machine, but a Ray address was given ({address!r}); "
                         "drop --ray-address or use --engine ray")
    if engine != "auto":
        return engine
    return "ray" if address is not None else "local"


def run(input: str | Path, output: str | Path, options: Any = None, *, engine: str = "auto", concurrency: int = 1,
        address: str | None = None, rows_per_unit: int | None = None, resume: bool = False,
        chunk_records: bool = False, **overrides: Any) -> Summary:
    """Pack every row of ``input`` (a JSON Lines or Parquet file, or a directory of them) into
    ``output``/part-00000.parquet (``output``: a new or empty directory), with ``concurrency``
    workers on ``engine``.

    ``options``/``overrides`` are the job's pack options; a row's own ``options`` change them for that
    row. ``chunk_records`` fills the per-chunk ``chunks`` column (one record per input chunk; off by
    default: it costs more than the packing at 200 chunks, and ``dropped`` lists every chunk left out
    either way). ``resume``: finish the stopped job recorded in ``output`` (:mod:`edgewise.batch.job`).
    Returns a :class:`~edgewise.batch.local.Summary` (rows, error rows, files, seconds).

    The job holds ``output``'s lock from start to end: while another job holds it, this one stops
    at once with :class:`~edgewise.batch.lock.OutputLocked` naming it (pid, host, start time, command).
    """
    from ..packing.packer import Packer
    from .job import Job, check_output, recorded_rows_per_unit
    from .lock import OutputLock
    from .units import plan_job

    opts = Packer(options, preload=False, **overrides).options  # a bad option fails now, once
    if concurrency < 1:
        raise InputError(f"concurrency must be >= 1, but got {concurrency}")
    if resume and rows_per_unit is None:
        rows_per_unit = recorded_rows_per_unit(output)  # cut the input as the stopped run did
    units, rows_per_unit = plan_job(input, rows_per_unit, workers=concurrency)
    total = sum(u["rows"] for u in units)
    chosen = choose_engine(engine, total, address)
    if chosen == "ray":
        from .ray_data import need_ray

        need_ray()  # a missing extra fails before the output folder is made
    check_output(output)  # a folder of other things is refused before a lock file is made in it
    with OutputLock(output):  # the manifest is read again under the lock: another job may have moved it on
        job = Job.open(output, units, {**opts.to_dict(), "chunk_records": chunk_records},
                       rows_per_unit=rows_per_unit, resume=resume, engine=chosen)
        if chosen == "local":
            return run_local(job, opts, concurrency=concurrency, chunk_records=chunk_records)
        from .ray_data import run_ray

        return run_ray(job, opts, concurrency=concurrency, address=address, chunk_records=chunk_records)
