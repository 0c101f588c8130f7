"""The input of a batch job, cut into units of work, each read by the worker that packs it.

``plan(path)`` lists the input files (a file, or every ``.jsonl``/``.json``/``.ndjson``/``.parquet``
file under a directory, in name order) and cuts them into units of about ``rows_per_unit`` rows.
It reads JSON Lines once, to count rows and note where each unit starts (a byte offset), and
Parquet only for its metadata (a unit is a run of row groups). Every row gets its input index: its
position over all files in that order, blank lines not counted. A worker then reads its unit
(:func:`read_unit`) and packs it; the driver never holds the rows.

>>> import tempfile, os
>>> d = tempfile.mkdtemp(); p = os.path.join(d, "in.jsonl")
>>> _ = open(p, "w").write('{"query": "q", "chunks": ["a"]}\\n\\n[1]\\n{"query": "r", "chunks": ["b"]}\\n')
>>> units = plan(p, rows_per_unit=2)
>>> [(u["base"], u["rows"]) for u in units]
[(0, 2), (2, 1)]
>>> [(i, type(obj).__name__) for i, obj, _ in read_unit(units[0])]
[(0, 'dict'), (1, 'LineError')]
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..jsonin.strict import clean, quick
from .rows import arrow_rows, own_id, parse_line, where

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
PARQUET_SUFFIXES = (".parquet",)
MAX_UNIT = 500
#: the read buffer of a JSON Lines file: a row of 200 chunks is ~110 KB, and reading it a line at a
#: time through the default 8 KB buffer took 5x longer
READ_BUFFER = 1 << 20


class LineError:
    """A JSON Lines row that does not parse: kept as a row, so its error reaches the output, under
    the id the line gives itself when one can be read from it (:func:`line_id`)."""

    def __init__(self, message: str, rid: str | None = None) -> None:
        self.message = message
        self.id = rid


def input_files(path: str | Path) -> list[Path]:
    """The files of ``path``: itself, or the JSON Lines and Parquet files under it, in name order."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise InputError(f"input {str(path)!r} is neither a file nor a directory")
    found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in JSONL_SUFFIXES + PARQUET_SUFFIXES)
    if not found:
        raise InputError(f"input directory {str(path)!r} holds no .jsonl, .json, .ndjson or .parquet file")
    return found


def plan(path: str | Path, rows_per_unit: int | None = None, workers: int = 1) -> list[dict[str, Any]]:
    """Units of work over the input at ``path``: dicts of ``path``, ``kind``, ``start``, ``rows``, ``base``.

    ``rows_per_unit`` defaults to about four units per worker (so the workers finish together), at
    most :data:`MAX_UNIT` rows (so a restarted worker redoes little); a Parquet row group is never split.
    """
    return plan_job(path, rows_per_unit, workers)[0]


def plan_job(path: str | Path, rows_per_unit: int | None = None, workers: int = 1) -> tuple[list[dict[str, Any]], int]:
    """:func:`plan`'s units, and the rows per unit they were cut with (the default, when None was given)."""
    files = input_files(path)
    if rows_per_unit is None:
        total = sum(count_rows(f) for f in files)
        rows_per_unit = max(1, min(MAX_UNIT, math.ceil(total / (4 * max(1, workers)))))
    if rows_per_unit < 1:
        raise InputError(f"rows_per_unit must be >= 1, but got {rows_per_unit}")
    units: list[dict[str, Any]] = []
    base = 0
    for f in files:
        cut = _parquet_units if f.suffix.lower() in PARQUET_SUFFIXES else _jsonl_units
        for unit in cut(f, rows_per_unit):
            units.append({**unit, "path": str(f), "base": base})
            base += unit["rows"]
    return units, rows_per_unit


def count_rows(path: Path) -> int:
    """The rows of one input file: its non-blank lines, or the rows its Parquet metadata counts."""
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return sum(u["rows"] for u in _parquet_units(path, 1 << 62))
    try:
        with open(path, "rb", buffering=READ_BUFFER) as f:
            return list(map(bytes.isspace, f)).count(False)  # a line of only whitespace is blank
    except OSError as exc:
        raise InputError(f"input file {str(path)!r} could not be read: {exc.strerror}") from None


def _jsonl_units(path: Path, rows_per_unit: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    offset, rows, start = 0, 0, 0
    try:
        with open(path, "rb", buffering=READ_BUFFER) as f:
            for line in f:
                if not line.isspace():  # (no copy of the line, as strip() makes)
                    if rows == rows_per_unit:
                        out.append({"kind": "jsonl", "start": start, "rows": rows})
                        start, rows = offset, 0
                    rows += 1
                offset += len(line)
    except OSError as exc:
        raise InputError(f"input file {str(path)!r} could not be read: {exc.strerror}") from None
    if rows:
        out.append({"kind": "jsonl", "start": start, "rows": rows})
    return out


def _parquet_units(path: Path, rows_per_unit: int) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"input file {str(path)!r} is not a readable Parquet file: {exc}") from None
    out: list[dict[str, Any]] = []
    groups: list[int] = []
    rows = 0
    for g in range(meta.num_row_groups):
        if groups and rows + meta.row_group(g).num_rows > rows_per_unit:
            out.append({"kind": "parquet", "start": groups, "rows": rows})
            groups, rows = [], 0
        groups.append(g)
        rows += meta.row_group(g).num_rows
    if groups and rows:
        out.append({"kind": "parquet", "start": groups, "rows": rows})
    return out


def read_unit(unit: dict[str, Any]) -> list[tuple[int, Any, bool]]:
    """The rows of one unit: ``(input index, row object or LineError, from_arrow)``."""
    return list(iter_unit(unit))


def iter_unit(unit: dict[str, Any]) -> Iterator[tuple[int, Any, bool]]:
    """:func:`read_unit`'s rows one at a time (JSON Lines are parsed as they are reached, so a worker
    holds one row of a unit at a time, not the unit)."""
    if unit["kind"] == "parquet":
        import pyarrow.parquet as pq

        table = pq.ParquetFile(unit["path"]).read_row_groups(list(unit["start"]))
        index = unit["base"]
        for batch in table.to_batches(max_chunksize=64):
            for row in arrow_rows(batch):
                yield index, row, True
                index += 1
        return
    found = 0
    with open(unit["path"], "rb", buffering=READ_BUFFER) as f:
        f.seek(unit["start"])
        index = unit["base"]
        while found < unit["rows"]:
            raw = f.readline()
            if not raw:
                break
            if raw.isspace():
                continue
            yield index, _parse(raw, where(unit["path"], index)), False
            index += 1
            found += 1
    if found != unit["rows"]:
        raise InputError(f"input file {unit['path']!r} changed while the job ran: expected {unit['rows']} rows "
                         f"from byte {unit['start']}, found {found}")


def _parse(raw: bytes, source: str) -> Any:
    fast = fast_row(raw)
    if fast is not None:
        return fast
    from ..jsonin.strict import decode

    try:
        return parse_line(decode(raw, source), source)
    except InputError as exc:
        return LineError(f"InputError: {' '.join(str(exc).splitlines())}", line_id(raw))


def line_id(raw: bytes) -> str | None:
    """The id of a JSON Lines row the strict reader refused (a number beyond a float, a lone
    surrogate...), read by the lenient ``json`` module, when the line is an object with one
    (:func:`edgewise.batch.rows.own_id`); None when it is not, or is not JSON at all.

    >>> line_id(b'{"id": "bad9", "query": "q", "chunks": ["a"], "options": {"budget": 1e400}}'), line_id(b'{"id": ')
    ('bad9', None)
    """
    import json

    if not raw.lstrip().startswith(b"{"):
        return None
    try:
        return own_id(json.loads(raw))
    except (ValueError, RecursionError):  # not JSON (or not UTF-8), or nested too deep to read
        return None


def fast_row(raw: bytes) -> dict[str, Any] | None:
    """The row of a JSON Lines line read by orjson (3x faster than the strict reader on long rows),
    or None, and the strict reader then reads it: when orjson did not read the line
    (:func:`edgewise.jsonin.strict.quick`), when the line is no object, or when orjson's value is not the
    strict reader's (:func:`edgewise.jsonin.strict.clean`). A test holds the two readers to each other.
    """
    value = quick(raw, minimum=0)
    return value if type(value) is dict and clean(value) else None
