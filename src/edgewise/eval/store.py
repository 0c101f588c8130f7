"""The results store of a run directory: an append-only JSONL file that survives ``kill -9``.

Each result is one line written with a single ``write`` to a file opened with ``O_APPEND``, so a
killed process leaves either the whole line or, at worst, a torn last line without its newline.
Before every append a torn tail is cut back to the last complete line (with a :class:`StoreWarning`
that counts the bytes dropped). Reading is byte-safe: the file is split on ``b"\\n"`` only and each
line decoded on its own, so a bad line (not UTF-8, not JSON, a torn tail) is skipped and reported
by its line number instead of making the store unreadable. The first result of each key is kept,
so a resumed run holds exactly one result per key.

A runner holds :meth:`Store.lock` for the whole run: a second runner on the same directory stops at
once with a :class:`RunLocked` error naming the holder (pid, host, start time).

>>> import tempfile
>>> s = Store(tempfile.mkdtemp())
>>> s.append({"key": "a", "correct": 1.0}); s.append({"key": "a", "correct": 0.0})
>>> [r["correct"] for r in s.load()], s.keys()
([1.0], {'a'})
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import EdgewiseError, InputError
from ..files.writing import HolderLock

RESULTS = "results.jsonl"
MANIFEST = "run.json"
LOCK = "run.lock"


class StoreWarning(UserWarning):
    """Something in a results file could not be used (a torn or unreadable line); it was skipped or cut."""


class RunLocked(EdgewiseError):
    """Another runner holds the run directory."""


def result_key(**parts: Any) -> str:
    """A stable hash of the parts that identify a result (canonical JSON, SHA-1).

    >>> result_key(task="kv", example="e1", position=0) == result_key(position=0, example="e1", task="kv")
    True
    """
    return hashlib.sha1(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def plan_cells(plan: dict[str, Any]) -> Iterator[tuple[str, str, int | None, str]]:
    """``(key, example, position, condition)`` for every result a run plans, in the order it asks them,
    from the ``plan`` it records in ``run.json``: ``examples`` (ids), ``positions``, ``grid`` (pairs
    of condition and its positions, ``[null]`` for a condition asked once per example) and ``key``
    (the other parts of every result key).

    >>> plan = {"examples": ["e1", "e2"], "positions": [0, 4], "grid": [["baseline", [0, 4]], ["oracle", [None]]],
    ...         "key": {"task": "kv"}}
    >>> [(e, p, c) for _, e, p, c in plan_cells(plan)]
    [('e1', 0, 'baseline'), ('e1', None, 'oracle'), ('e1', 4, 'baseline'), ('e2', 0, 'baseline'), ('e2', None, 'oracle'), ('e2', 4, 'baseline')]
    """
    for example in plan["examples"]:
        for i, pos in enumerate(plan["positions"]):
            for cond, positions in plan["grid"]:
                if pos in positions or (i == 0 and positions == [None]):
                    at = pos if pos in positions else None
                    yield result_key(**plan["key"], example=example, condition=cond, position=at), example, at, cond


class RunLock(HolderLock):
    """An exclusive lock on a run directory (``flock`` on ``run.lock``), held by one runner at a time.

    The holder writes its pid, host, start time and command line into the file, so a second runner
    can say who holds it. The lock is released when the holder releases it or its process ends (even
    by ``kill -9``), so it is never stale.
    """

    def __init__(self, directory: str | Path) -> None:
        super().__init__(Path(directory) / LOCK)

    def acquire(self) -> RunLock:
        if self._fd is not None:
            raise RunLocked(f"run directory {str(self.path.parent)!r} is already locked by this runner")
        fd = self.open()
        if not self.try_take(fd):
            os.close(fd)
            raise RunLocked(f"run directory {str(self.path.parent)!r} is in use by another runner "
                            f"({self.describe(self.holder())}); wait for it to finish or stop it, or write to "
                            "another directory")
        self.hold(fd)
        return self


class Store:
    """Results of one run directory: ``results.jsonl``, the ``run.json`` manifest and ``run.lock``.

    After :meth:`load`, ``problems`` lists the lines that were skipped (``"line N: why"``).
    """

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.path = self.dir / RESULTS
        self._lock = threading.Lock()
        self.problems: list[str] = []

    def lock(self) -> RunLock:
        """The run directory's exclusive lock: ``with store.lock(): ...`` (raises :class:`RunLocked`)."""
        return RunLock(self.dir)

    def _repair_tail(self, fd: int) -> None:
        """Cut a torn last line (a write killed mid-way) back to the last newline, saying how much went."""
        size = os.fstat(fd).st_size
        if not size or os.pread(fd, 1, size - 1) == b"\n":
            return
        end = size
        while end > 0:  # find the last newline, 64 KiB at a time
            start = max(0, end - 65536)
            cut = os.pread(fd, end - start, start).rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        else:
            keep = 0
        os.ftruncate(fd, keep)
        warnings.warn(f"{self.path}: cut off a torn last line ({size - keep} bytes without a newline, "
                      "left by an interrupted write) before appending", StoreWarning, stacklevel=3)

    def append(self, record: dict[str, Any]) -> None:
        """Append one result as one line, in one write (after cutting off a torn tail, if any)."""
        line = (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        with self._lock:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                self._repair_tail(fd)
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)

    def load(self) -> list[dict[str, Any]]:
        """Every readable result, the first one per key, in the order written.

        Lines that cannot be used are skipped, listed in ``problems`` and reported in one
        :class:`StoreWarning`: a torn last line (no newline), a line that is not UTF-8 or not a JSON
        object.
        """
        self.problems = []
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise InputError(f"results file {str(self.path)!r} could not be read: {exc.strerror or exc}") from None
        out, seen = [], set()
        lines = data.split(b"\n")
        torn = lines.pop()  # after the last newline: empty, or a torn tail
        for lineno, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                self.problems.append(f"line {lineno}: not UTF-8 (byte {exc.start}: {exc.reason})")
                continue
            except json.JSONDecodeError as exc:
                self.problems.append(f"line {lineno}: not JSON ({exc.msg} at column {exc.colno})")
                continue
            if not isinstance(rec, dict) or "key" not in rec:
                self.problems.append(f"line {lineno}: not a result (a JSON object with a 'key')")
                continue
            if rec["key"] not in seen:
                seen.add(rec["key"])
                out.append(rec)
        if torn:
            self.problems.append(f"line {len(lines) + 1}: torn last line ({len(torn)} bytes without a newline, "
                                 "from an interrupted write; the next append cuts it off)")
        if self.problems:
            warnings.warn(f"{self.path}: skipped {len(self.problems)} unusable line(s): " + "; ".join(self.problems),
                          StoreWarning, stacklevel=2)
        return out

    def keys(self) -> set[str]:
        return {r["key"] for r in self.load()}

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Record what the run was asked to do (atomically replaced)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, self.dir / MANIFEST)

    def manifest(self) -> dict[str, Any]:
        """The ``run.json`` of the directory (``{}`` when there is none); a one-line error when it is corrupt."""
        path = self.dir / MANIFEST
        fix = "run the same `edgewise eval run` command to rewrite it"
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise InputError(f"manifest {str(path)!r} could not be read: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise InputError(f"manifest {str(path)!r} is not UTF-8 (byte {exc.start}: {exc.reason}); {fix}") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"manifest {str(path)!r} is not valid JSON ({exc.msg} at line {exc.lineno} column "
                             f"{exc.colno}); {fix}") from None
        if not isinstance(data, dict):
            raise InputError(f"manifest {str(path)!r} must hold a JSON object, but holds {type(data).__name__}; {fix}")
        return data
