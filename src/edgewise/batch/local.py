"""Packing units of rows, and the plain process-pool engine (no Ray).

A worker holds one :class:`~edgewise.packer.Packer` (tokenizer and scorer models loaded once) and
packs a unit at a time (:func:`pack_unit`). Before packing a unit, the texts its rows need embedded
by the job's embedding scorer (``dense``, ``hybrid``...) go through the model in one call, so the
ONNX runs see full batches across rows; each row's pack then finds its vectors in the cache.
:func:`run_local` runs the units on a pool of ``concurrency`` processes (in this process for 1)
and writes one Parquet file, rows in input order.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EdgewiseError, InputError
from .rows import error_row, pack_row, read_row, to_table
from .units import LineError, read_unit


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
                "concurrency": self.concurrency}


def prepare_output(output: str | Path) -> Path:
    """The output directory, created; one that already holds files is refused (nothing is overwritten)."""
    out = Path(output)
    if out.exists() and not out.is_dir():
        raise InputError(f"output {str(output)!r} is a file; give a directory for the Parquet files")
    if out.is_dir() and any(out.iterdir()):
        raise InputError(f"output directory {str(output)!r} is not empty; give a new or empty directory")
    out.mkdir(parents=True, exist_ok=True)
    return out


def warm(packer: Any, rows: Sequence[tuple[int, Any, bool]]) -> int:
    """Embed, in one model call, what the rows packed with the packer's own scorer will score; returns
    how many texts were handed to the model (0 when the scorer is not an embedding scorer)."""
    from ..chunk import normalize
    from ..score.rank import scored_text

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
        except (EdgewiseError, ValueError, TypeError):
            continue  # packing the row reports it
        if packer.options.rescore or options.get("rescore") or any(c.score is None for c in unique):
            texts[query] = None
            texts.update(dict.fromkeys(scored_text(c) for c in unique))
    if texts:
        scorer.embed(list(texts))
    return len(texts)


def pack_unit(packer: Any, unit: dict[str, Any]) -> Any:
    """Read and pack one unit: an Arrow table of its output rows, in input order."""
    rows = read_unit(unit)
    warm(packer, [r for r in rows if not isinstance(r[1], LineError)])
    return to_table(error_row(index, str(index), obj.message) if isinstance(obj, LineError)
                    else pack_row(packer, index, obj, from_arrow=from_arrow) for index, obj, from_arrow in rows)


_WORKER: Any = None


def _init_worker(options: Any) -> None:
    global _WORKER
    from ..packer import Packer

    _WORKER = Packer(options)


def _run_unit(unit: dict[str, Any]) -> Any:
    return pack_unit(_WORKER, unit)


def run_local(units: list[dict[str, Any]], output: str | Path, options: Any = None, *, concurrency: int = 1) -> Summary:
    """Pack ``units`` on ``concurrency`` processes (1: in this process) into ``output``/part-00000.parquet."""
    import pyarrow.parquet as pq

    from ..packer import Packer
    from .rows import schema

    if concurrency < 1:
        raise InputError(f"concurrency must be >= 1, but got {concurrency}")
    out = prepare_output(output)
    target = out / "part-00000.parquet"
    t0 = time.perf_counter()
    rows = errors = 0
    pool = None
    startup = 0.0
    with pq.ParquetWriter(target, schema()) as writer:
        try:
            if concurrency == 1:
                packer = Packer(options)
                tables = (pack_unit(packer, u) for u in units)
            else:
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                pool = ProcessPoolExecutor(concurrency, mp_context=multiprocessing.get_context("spawn"),
                                           initializer=_init_worker, initargs=(options,))
                s0 = time.perf_counter()
                list(pool.map(_noop, range(concurrency)))  # the workers are up and their Packers built
                startup = time.perf_counter() - s0
                tables = pool.map(_run_unit, units)
            for table in tables:  # in unit order: the file is in input order
                writer.write_table(table)
                rows += table.num_rows
                errors += table.num_rows - table.column("error").null_count
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
    return Summary("local", rows, errors, [str(target)], time.perf_counter() - t0, startup, concurrency)


def _noop(_: int) -> None:
    return None
