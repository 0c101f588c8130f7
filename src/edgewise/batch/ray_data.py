"""The batch job on Ray Data: units of input → ``map_batches`` on Packer actors → ``write_parquet``.

Each actor builds one :class:`~edgewise.packing.packer.Packer` in its constructor (tokenizer and any
scoring or pruning model loaded once per worker) and packs a few units of rows per call
(:func:`units_per_call`: Ray's own cost per call is paid once per ~200 rows, not once a unit), each
unit into its own file; ``concurrency`` actors run at once. An actor that dies is restarted and its
call run again, each unit rewritten whole (``max_restarts``/``max_task_retries``, bounded so a row
that kills every worker stops the job).
:func:`pack_dataset` is the same step for a ``ray.data.Dataset`` you already have (from
``ray.data.read_parquet``, ``read_json``...), rows of ``query``, ``chunks``, ``options?``, ``id?``.

Needs the ``ray`` extra; ``import edgewise`` never imports ray.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..errors import InputError, missing_extra
from ..raysupport import connect
from .job import Job
from .local import Summary, stopping, write_packed_unit
from .rows import arrow_rows, pack_row, to_table

#: actor restarts and task retries per unit: enough for a lost node or an OOM kill, not a crash loop
RETRIES = 3


def need_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise missing_extra("edgewise batch on Ray", "ray[data]", "ray") from None
    return ray


class PackUnits:
    """A Ray Data callable class: builds a Packer once, then packs each unit of a batch into its own
    file of the job's folder (``target``); returns the rows written per unit."""

    def __init__(self, options: Any = None, chunk_records: bool = False, **overrides: Any) -> None:
        from ..packing.packer import Packer

        self.packer = Packer(options, **overrides)
        self.chunk_records = chunk_records

    def __call__(self, batch: Any) -> Any:
        import json

        import pyarrow as pa

        rows = [write_packed_unit(self.packer, item["target"], json.loads(item["unit"]), chunk_records=self.chunk_records)
                for item in batch.to_pylist()]
        return pa.table({"rows": pa.array(rows, pa.int64())})


class PackRows:
    """A Ray Data callable class for rows of ``query``, ``chunks``, ``options?``, ``id``."""

    def __init__(self, options: Any = None, chunk_records: bool = False, **overrides: Any) -> None:
        from ..packing.packer import Packer

        self.packer = Packer(options, **overrides)
        self.chunk_records = chunk_records

    def __call__(self, batch: Any) -> Any:
        return to_table(pack_row(self.packer, None, row, from_arrow=True, chunk_records=self.chunk_records)
                        for row in arrow_rows(batch))


def _map(ds: Any, cls: type, options: Any, *, concurrency: int, batch_size: int, retries: int,
         **kwargs: Any) -> Any:
    """``ds.map_batches(cls)`` on a pool of ``concurrency`` actors of one CPU each, each actor restarted
    and each unit retried at most ``retries`` times (Ray Data's own default is without bound)."""
    import warnings

    ray = need_ray()
    from ray.util.annotations import RayDeprecationWarning

    with warnings.catch_warnings():  # restarts are set through ray_remote_args, deprecated from Ray 2.60 with no
        warnings.simplefilter("ignore", RayDeprecationWarning)  # named replacement yet (ray is pinned: extra "ray")
        return ds.map_batches(cls, fn_constructor_kwargs={"options": options, **kwargs}, batch_size=batch_size,
                              batch_format="pyarrow", compute=ray.data.ActorPoolStrategy(size=concurrency),
                              num_cpus=1, max_restarts=retries, max_task_retries=retries)


def pack_dataset(ds: Any, options: Any = None, *, concurrency: int = 1, batch_size: int = 64,
                 retries: int = RETRIES, chunk_records: bool = False, **overrides: Any) -> Any:
    """Pack every row of ``ds`` (a ``ray.data.Dataset``) on ``concurrency`` Packer actors: a
    Dataset of output rows (:func:`edgewise.batch.rows.schema`), one per input row, lazily.

    Rows have ``query``, ``chunks``, and optionally ``options`` (an object, or JSON text) and ``id``.
    ``ds`` must have an ``id`` column (a Dataset's rows have no stable position to use instead:
    :func:`edgewise.batch.run` numbers the rows of files); a row whose id is null is an error row.
    ``chunk_records`` fills the per-chunk ``chunks`` column (null by default, as in ``run``).
    The ``concurrency`` actors hold a CPU each for the whole job: leave CPUs for the tasks that read
    ``ds`` (on a 2-CPU machine, ``read_parquet`` feeding 2 actors waits for ever).

    For example (tests/batch/test_batch.py runs this on a local Ray instance)::

        ds = ray.data.read_parquet("requests.parquet")
        pack_dataset(ds, budget=2000).write_parquet("out/")
    """
    from ..packing.packer import Packer

    need_ray()
    if concurrency < 1:
        raise InputError(f"concurrency must be >= 1, but got {concurrency}")
    options = Packer(options, preload=False, **overrides).options  # a bad option fails here, not in every actor
    columns = ds.columns() or []
    if "id" not in columns:  # rows of a Dataset have no stable position to stand in for it
        raise InputError(f"pack_dataset needs an id column to name each output row, but the Dataset has only: "
                         f"{', '.join(columns) or 'no columns'}; add one, or give the files to edgewise.batch.run")
    return _map(ds, PackRows, options, concurrency=concurrency, batch_size=batch_size, retries=retries,
                chunk_records=chunk_records)


#: rows an actor call should pack at least, so that what Ray spends per call (~10-15 ms between two
#: calls on the 2-core machine of BENCHMARKS.md) stays a few per cent of the call
CALL_ROWS = 200


def units_per_call(units: int, rows_per_unit: int, concurrency: int) -> int:
    """How many units one actor call packs: enough for :data:`CALL_ROWS` rows, but no more than
    leaves every actor two calls (so the actors finish together); each unit still has its own file.

    >>> units_per_call(20, 15, 1), units_per_call(20, 15, 2), units_per_call(8, 500, 2), units_per_call(3, 1, 4)
    (10, 5, 1, 1)
    """
    return max(1, min(math.ceil(CALL_ROWS / max(1, rows_per_unit)), units // (2 * concurrency)))


def start(address: str | None) -> tuple[bool, float]:
    """Connect to the Ray cluster at ``address``, or start a local instance (None); returns whether
    this call started it (and so should shut it down) and the seconds it took. A running
    ``ray.init`` of the caller is used as it is."""
    import logging

    t0 = time.perf_counter()
    started = connect(address, logging_level=logging.WARNING, log_to_driver=False)
    return started, time.perf_counter() - t0


def run_ray(job: Job, options: Any = None, *, concurrency: int = 1, address: str | None = None,
            retries: int = RETRIES, chunk_records: bool = False) -> Summary:
    """Pack the units ``job`` has not written yet on Ray Data with ``concurrency`` Packer actors, each
    unit into its file of the job's folder, then join them into its ``part-00000.parquet``.

    Without ``address`` (and no ``ray.init`` already made) a local Ray instance is started for
    the job and stopped after it; its start-up time is reported apart in the summary.
    """
    import json

    ray = need_ray()
    if concurrency < 1:
        raise InputError(f"concurrency must be >= 1, but got {concurrency}")
    todo = job.todo()
    resumed = sum(u["rows"] for i, u in enumerate(job.units) if i not in set(todo))
    started, startup = start(address) if todo else (False, 0.0)
    t0 = time.perf_counter()
    try:
        with stopping(job):
            if todo:
                ctx = ray.data.DataContext.get_current()
                ctx.enable_progress_bars = False
                ctx.print_on_execution_start = False
                items = [{"target": str(job.unit_path(i)), "unit": json.dumps(job.units[i])} for i in todo]
                per_call = units_per_call(len(items), job.manifest["rows_per_unit"], concurrency)
                ds = ray.data.from_items(items, override_num_blocks=math.ceil(len(items) / per_call))
                written = _map(ds, PackUnits, options, concurrency=concurrency, batch_size=per_call, retries=retries,
                               chunk_records=chunk_records)
                sum(r["rows"] for r in written.iter_rows())
    finally:
        if started:
            ray.shutdown()
    rows, errors = job.finish()
    summary = Summary("ray", rows, errors, job.files, time.perf_counter() - t0, startup, concurrency)
    summary.extra.update(resumed_rows=resumed, steady_rows_per_s=job.steady, first_unit_seconds=job.first_unit)
    return summary
