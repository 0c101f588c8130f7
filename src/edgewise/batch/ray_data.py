"""The batch job on Ray Data: units of input → ``map_batches`` on Packer actors → ``write_parquet``.

Each actor builds one :class:`~edgewise.packer.Packer` in its constructor (tokenizer and any
scoring or pruning model loaded once per worker) and packs a unit of rows per call;
``concurrency`` actors run at once. An actor that dies is restarted and its unit run again
(``max_restarts``/``max_task_retries``, bounded so a row that kills every worker stops the job).
:func:`pack_dataset` is the same step for a ``ray.data.Dataset`` you already have (from
``ray.data.read_parquet``, ``read_json``...), rows of ``query``, ``chunks``, ``options?``, ``id?``.

Needs the ``ray`` extra; ``import edgewise`` never imports ray.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..errors import InputError, missing_extra
from ..raysupport import connect
from .local import Summary, pack_unit, prepare_output
from .rows import pack_row, to_table

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
    """A Ray Data callable class: builds a Packer once, then packs the units of each batch."""

    def __init__(self, options: Any = None, **overrides: Any) -> None:
        from ..packer import Packer

        self.packer = Packer(options, **overrides)

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        return pa.concat_tables([pack_unit(self.packer, u) for u in batch.to_pylist()])


class PackRows:
    """A Ray Data callable class for rows of ``query``, ``chunks``, ``options?``, ``id``."""

    def __init__(self, options: Any = None, **overrides: Any) -> None:
        from ..packer import Packer

        self.packer = Packer(options, **overrides)

    def __call__(self, batch: Any) -> Any:
        return to_table(pack_row(self.packer, None, row, from_arrow=True) for row in batch.to_pylist())


def _map(ds: Any, cls: type, options: Any, *, concurrency: int, batch_size: int, retries: int) -> Any:
    """``ds.map_batches(cls)`` on a pool of ``concurrency`` actors of one CPU each, each actor restarted
    and each unit retried at most ``retries`` times (Ray Data's own default is without bound)."""
    import warnings

    ray = need_ray()
    from ray.util.annotations import RayDeprecationWarning

    with warnings.catch_warnings():  # restarts are set through ray_remote_args, deprecated from Ray 2.60 with no
        warnings.simplefilter("ignore", RayDeprecationWarning)  # named replacement yet (ray is pinned: extra "ray")
        return ds.map_batches(cls, fn_constructor_kwargs={"options": options}, batch_size=batch_size,
                              batch_format="pyarrow", compute=ray.data.ActorPoolStrategy(size=concurrency),
                              num_cpus=1, max_restarts=retries, max_task_retries=retries)


def pack_dataset(ds: Any, options: Any = None, *, concurrency: int = 1, batch_size: int = 64,
                 retries: int = RETRIES, **overrides: Any) -> Any:
    """Pack every row of ``ds`` (a ``ray.data.Dataset``) on ``concurrency`` Packer actors: a
    Dataset of output rows (:func:`edgewise.batch.rows.schema`), one per input row, lazily.

    Rows have ``query``, ``chunks``, and optionally ``options`` (an object, or JSON text) and ``id``.
    ``ds`` must have an ``id`` column (a Dataset's rows have no stable position to use instead:
    :func:`edgewise.batch.run` numbers the rows of files); a row whose id is null is an error row.
    The ``concurrency`` actors hold a CPU each for the whole job: leave CPUs for the tasks that read
    ``ds`` (on a 2-CPU machine, ``read_parquet`` feeding 2 actors waits for ever).

    For example (tests/test_batch.py runs this on a local Ray instance)::

        ds = ray.data.read_parquet("requests.parquet")
        pack_dataset(ds, budget=2000).write_parquet("out/")
    """
    from ..packer import Packer

    need_ray()
    if concurrency < 1:
        raise InputError(f"concurrency must be >= 1, but got {concurrency}")
    options = Packer(options, preload=False, **overrides).options  # a bad option fails here, not in every actor
    columns = ds.columns() or []
    if "id" not in columns:  # rows of a Dataset have no stable position to stand in for it
        raise InputError(f"pack_dataset needs an id column to name each output row, but the Dataset has only: "
                         f"{', '.join(columns) or 'no columns'}; add one, or give the files to edgewise.batch.run")
    return _map(ds, PackRows, options, concurrency=concurrency, batch_size=batch_size, retries=retries)


def start(address: str | None) -> tuple[bool, float]:
    """Connect to the Ray cluster at ``address``, or start a local instance (None); returns whether
    this call started it (and so should shut it down) and the seconds it took. A running
    ``ray.init`` of the caller is used as it is."""
    import logging

    t0 = time.perf_counter()
    started = connect(address, logging_level=logging.WARNING, log_to_driver=False)
    return started, time.perf_counter() - t0


def run_ray(units: list[dict[str, Any]], output: str | Path, options: Any = None, *, concurrency: int = 1,
            address: str | None = None, retries: int = RETRIES, rows_per_file: int = 10_000) -> Summary:
    """Pack ``units`` on Ray Data with ``concurrency`` Packer actors and write Parquet files into ``output``.

    Without ``address`` (and no ``ray.init`` already made) a local Ray instance is started for
    the job and stopped after it; its start-up time is reported apart in the summary.
    """
    ray = need_ray()
    if concurrency < 1:
        raise InputError(f"concurrency must be >= 1, but got {concurrency}")
    out = prepare_output(output)
    started, startup = start(address)
    try:
        t0 = time.perf_counter()
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        ds = ray.data.from_items(units, override_num_blocks=max(1, len(units)))
        packed = _map(ds, PackUnits, options, concurrency=concurrency, batch_size=1, retries=retries)
        packed.write_parquet(str(out), min_rows_per_file=rows_per_file)
        seconds = time.perf_counter() - t0
    finally:
        if started:
            ray.shutdown()
    return _summary(out, concurrency, seconds, startup)


def _summary(out: Path, concurrency: int, seconds: float, startup: float) -> Summary:
    import pyarrow.parquet as pq

    files = sorted(str(f) for f in out.glob("*.parquet"))
    rows = errors = 0
    for f in files:
        col = pq.read_table(f, columns=["error"]).column("error")
        rows += len(col)
        errors += len(col) - col.null_count
    return Summary("ray", rows, errors, files, seconds, startup, concurrency)
