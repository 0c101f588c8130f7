"""The output folder of a batch job: a manifest, one file per finished unit, and the result once done.

While a job runs, its folder holds ``_edgewise_batch.json`` (the manifest: the input's files with
their sizes and modification times, the units, the options, ``"state": "running"``) and a
``.units/`` folder where each unit's rows land as ``unit-NNNNN.arrow`` once the unit is packed (Arrow
IPC, cheap to write and read back; written under a temporary name, then renamed: a unit file is
whole or absent). Parquet readers
skip names that start with ``_`` or ``.``, so a folder read while the job runs, or after it
stopped, holds no rows that look like a result. When every unit is there, the units are joined
in input order into ``part-00000.parquet``: a temporary name, read back whole (every row of the
input once, in order, every column readable: :func:`verify`), then renamed. Only then does the
manifest turn ``"done"`` with the row and error counts, and ``.units/`` goes. A unit file or a
result that does not verify stops the job with :class:`ResultError` instead (the job stays
``"running"``; a bad unit file is removed, so ``--resume`` packs it again).

One job at a time writes a folder: :func:`edgewise.batch.run` holds its lock
(:mod:`edgewise.batch.lock`, ``_edgewise_batch.lock``) from before :meth:`Job.open` to the end.

A job that stopped (killed, Ctrl-C, a worker lost) is finished by running it again with
``resume=True`` (``--resume``): the units already written are kept, the others packed, no row twice.
The input and the options must be the ones the manifest records; anything else is refused, saying
what differs.

>>> import tempfile, os
>>> d = tempfile.mkdtemp(); src = os.path.join(d, "in.jsonl")
>>> _ = open(src, "w").write('{"query": "q", "chunks": ["a"]}\\n')
>>> from edgewise.batch.units import plan
>>> job = Job.open(os.path.join(d, "out"), plan(src), {"budget": 50}, rows_per_unit=1, resume=False)
>>> job.todo()
[0]
>>> sorted(os.listdir(job.out))
['.units', '_edgewise_batch.json']
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from ..errors import EdgewiseError, InputError
from .lock import LOCK

MANIFEST = "_edgewise_batch.json"
UNITS = ".units"
RESULT = "part-00000.parquet"
FORMAT = "edgewise-batch/1"
RESUME_HINT = "re-run the same command with --resume (resume=True) to pack the rest"


class ResultError(EdgewiseError):
    """A unit file or the joined result does not hold what the job's input does: the job is not done."""


def fingerprint(units: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each input file of ``units``, once: its absolute path, size and modification time."""
    out: list[dict[str, Any]] = []
    for path in dict.fromkeys(u["path"] for u in units):
        st = os.stat(path)
        out.append({"path": str(Path(path).resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return out


class Job:
    """One job's output folder (see the module's docstring); :meth:`open` starts or resumes it."""

    def __init__(self, out: Path, manifest: dict[str, Any]) -> None:
        self.out = out
        self.manifest = manifest
        self.units: list[dict[str, Any]] = manifest["units"]
        self.started_ns = time.time_ns()  # units written before this (a resumed job's) are not this run's
        self.steady: float | None = None
        self.first_unit: float | None = None  # seconds from this run's start to its first unit written

    @classmethod
    def open(cls, output: str | Path, units: list[dict[str, Any]], options: dict[str, Any], *,
             rows_per_unit: int, resume: bool, engine: str = "local") -> Job:
        """Start a job in ``output`` (new or empty), or with ``resume`` take up the one recorded there."""
        out = Path(output)
        if out.exists() and not out.is_dir():
            raise InputError(f"output {str(output)!r} is a file; give a directory for the Parquet files")
        manifest = {"format": FORMAT, "state": "running", "engine": engine, "input": fingerprint(units),
                    "rows_per_unit": rows_per_unit, "options": options, "units": units,
                    "rows": sum(u["rows"] for u in units)}
        old = read_manifest(out)
        if old is not None and resume:
            _same_job(out, old, manifest)
            job = cls(out, old)
            if old.get("state") != "done":
                job.clean()
            return job
        if not is_empty(out):
            raise InputError(refusal(out, old))
        (out / UNITS).mkdir(parents=True, exist_ok=True)
        job = cls(out, manifest)
        job.save()
        return job

    def save(self) -> None:
        tmp = self.out / f"{MANIFEST}.tmp"
        tmp.write_text(json.dumps(self.manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, self.out / MANIFEST)

    def unit_path(self, number: int) -> Path:
        return self.out / UNITS / f"unit-{number:05d}.arrow"

    def todo(self) -> list[int]:
        """The numbers of the units not written yet (all of them for a new job, none once done)."""
        if self.manifest["state"] == "done":
            return []
        return [i for i in range(len(self.units)) if not self.unit_path(i).exists()]

    def clean(self) -> None:
        """Remove what a stopped job left half-written (temporary files); keep every finished unit."""
        (self.out / UNITS).mkdir(exist_ok=True)
        for f in list((self.out / UNITS).iterdir()) + list(self.out.glob(f"{RESULT}.tmp*")):
            if ".tmp" in f.name:
                f.unlink()

    def finish(self) -> tuple[int, int]:
        """Join the units into the result in input order, mark the job done; returns (rows, error rows).

        Also notes :attr:`steady`: the rows per second between the first unit written and the last
        (start-up left out), from the unit files' modification times, when this run wrote 3 or more;
        and :attr:`first_unit`: the seconds until this run wrote its first unit (start-up included).
        """
        import pyarrow.parquet as pq

        from .rows import schema

        if self.manifest["state"] == "done":
            return self.manifest["rows"], self.manifest["errors"]
        done_at: list[tuple[int, int]] = []
        tmp = self.out / f"{RESULT}.tmp"
        try:
            with pq.ParquetWriter(tmp, schema()) as writer:
                for i in range(len(self.units)):
                    writer.write_table(self._read_unit(i))
                    done_at.append((self.unit_path(i).stat().st_mtime_ns, self.units[i]["rows"]))
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            rows, errors = verify(tmp, self.units)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, self.out / RESULT)
        self.manifest.update(state="done", rows=rows, errors=errors, files=[RESULT])
        self.save()
        shutil.rmtree(self.out / UNITS, ignore_errors=True)
        self.steady = _steady(done_at, self.started_ns)
        mine = [t for t, _ in done_at if t >= self.started_ns]
        self.first_unit = (min(mine) - self.started_ns) / 1e9 if mine else None
        return rows, errors

    def _read_unit(self, number: int) -> Any:
        """Unit ``number``'s rows, checked: as many as the unit has in the input, numbered as its rows
        are. A unit file that is not (unreadable, cut short) is removed, so a resumed job packs it again."""
        import pyarrow as pa

        path, unit = self.unit_path(number), self.units[number]
        problem = None
        try:
            with pa.memory_map(str(path)) as source:
                table = pa.ipc.open_file(source).read_all()
        except (OSError, ValueError, pa.ArrowException) as exc:  # pyarrow's ArrowInvalid is a ValueError
            problem = f"cannot be read ({exc})"
        else:
            if table.num_rows != unit["rows"]:
                problem = f"holds {table.num_rows} rows, but the unit has {unit['rows']} in the input"
            elif table.column("index").to_pylist() != list(range(unit["base"], unit["base"] + unit["rows"])):
                problem = f"holds other rows than the unit's (input rows {unit['base']} to {unit['base'] + unit['rows'] - 1})"
        if problem is None:
            return table
        path.unlink(missing_ok=True)
        raise ResultError(f"the batch job in {str(self.out)!r} is not done: its unit file {str(path)!r} {problem}; the "
                          f"file was removed, and the job is not marked done; {RESUME_HINT}")

    @property
    def files(self) -> list[str]:
        return [str(self.out / RESULT)]

    def written(self) -> int:
        """How many units are written (for a message about a stopped job)."""
        return len(self.units) - len(self.todo())


def verify(path: str | Path, units: list[dict[str, Any]]) -> tuple[int, int]:
    """Read the joined result at ``path`` back whole, and check it holds every input row of ``units``
    once, in order (its ``index`` column 0, 1, ... up to the input's row count) in the output schema;
    returns its (rows, error rows), or raises :class:`ResultError` saying what is wrong."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .rows import schema

    expected = sum(u["rows"] for u in units)
    rows = errors = 0
    try:
        with pq.ParquetFile(path) as f:
            if not f.schema_arrow.equals(schema()):
                problem = "its columns are not the output schema's"
            elif f.metadata.num_rows != expected:
                problem = f"it holds {f.metadata.num_rows} rows"
            else:
                problem = None
                for batch in f.iter_batches(batch_size=4096):  # every column read, a few rows at a time
                    if batch.column("index").to_pylist() != list(range(rows, rows + batch.num_rows)):
                        problem = f"its rows from {rows} on are not the input's rows in order"
                        break
                    rows += batch.num_rows
                    errors += batch.num_rows - batch.column("error").null_count
                if problem is None and rows != expected:
                    problem = f"{rows} rows could be read from it"
    except (OSError, ValueError, pa.ArrowException) as exc:  # pyarrow's ArrowInvalid is a ValueError
        problem = f"it cannot be read back ({' '.join(str(exc).splitlines())})"
    if problem is not None:
        raise ResultError(f"the batch result {str(path)!r} did not verify ({problem}; the input has {expected} rows): "
                          f"the job is not marked done; {RESUME_HINT}")
    return rows, errors


def write_unit(path: Path, table: Any) -> None:
    """Write one unit's rows to ``path`` (Arrow IPC) whole or not at all (a temporary name, then a rename)."""
    import pyarrow as pa

    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    os.replace(tmp, path)


def _steady(done_at: list[tuple[int, int]], since_ns: int) -> float | None:
    """Rows per second from the first unit this run wrote to its last (the first unit's rows, which
    paid the start-up, left out); None for fewer than 3 units."""
    mine = sorted(t for t in done_at if t[0] >= since_ns)
    if len(mine) < 3 or mine[-1][0] <= mine[0][0]:
        return None
    return sum(n for _, n in mine[1:]) / ((mine[-1][0] - mine[0][0]) / 1e9)


def is_empty(out: Path) -> bool:
    """Whether ``out`` is absent or an empty folder (its lock file, held by this job, not counted)."""
    return not out.is_dir() or all(f.name == LOCK for f in out.iterdir())


def check_output(output: str | Path) -> None:
    """Refuse, before its lock file is made in it, an output that can hold no batch job: a file, or a
    folder holding other things and neither a batch manifest nor a batch lock."""
    out = Path(output)
    if out.exists() and not out.is_dir():
        raise InputError(f"output {str(output)!r} is a file; give a directory for the Parquet files")
    if out.is_dir() and not (out / MANIFEST).exists() and not (out / LOCK).exists() and not is_empty(out):
        raise InputError(refusal(out, None))


def recorded_rows_per_unit(output: str | Path) -> int | None:
    """The rows per unit of the job recorded in ``output`` (so a resumed job cuts its input the same way)."""
    manifest = read_manifest(Path(output))
    return None if manifest is None else manifest.get("rows_per_unit")


def read_manifest(out: Path) -> dict[str, Any] | None:
    """The manifest in ``out``, or None; one that cannot be read is an error saying so."""
    path = out / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"the batch manifest {str(path)!r} cannot be read ({exc}); give a new or empty directory") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(f"{str(path)!r} is not a batch manifest of this edgewise ({FORMAT}); give a new or empty directory")
    return manifest


def refusal(out: Path, manifest: dict[str, Any] | None) -> str:
    """Why a non-empty output folder is refused, and what to do instead."""
    if manifest is None:
        return f"output directory {str(out)!r} is not empty; give a new or empty directory"
    if manifest.get("state") == "done":
        return (f"output directory {str(out)!r} holds a finished batch job ({manifest.get('rows')} rows); "
                "give a new or empty directory")
    job = Job(out, manifest)
    return (f"output directory {str(out)!r} holds a batch job that stopped with {job.written()} of "
            f"{len(job.units)} units written; {RESUME_HINT}, or give a new or empty directory")


def _same_job(out: Path, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Refuse to resume the job in ``out`` with another input or other options, naming the difference."""
    def units(m: dict[str, Any]) -> Any:
        return [{**u, "path": str(Path(u["path"]).resolve())} for u in m.get("units") or []]

    for key, what in (("options", "pack options"), ("input", "input files"), ("rows_per_unit", "rows per unit")):
        if old.get(key) != new[key]:
            raise InputError(f"cannot resume the batch job in {str(out)!r}: its {what} differ from this run's "
                             f"({_diff(old.get(key), new[key])}); resume with the same input and options, "
                             "or give a new or empty directory")
    if units(old) != units(new):
        raise InputError(f"cannot resume the batch job in {str(out)!r}: its input rows differ from this run's "
                         f"({_diff(units(old), units(new))}); resume with the same input and options, "
                         "or give a new or empty directory")


def _diff(old: Any, new: Any) -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new)):
            if old.get(k) != new.get(k):
                return f"{k}: {old.get(k)!r} there, {new.get(k)!r} here"
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return f"{len(old)} there, {len(new)} here"
        for a, b in zip(old, new):
            if a != b:
                return _diff(a, b)
    return f"{old!r} there, {new!r} here"
