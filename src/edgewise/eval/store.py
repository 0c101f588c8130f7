"""The results store of a run: an append-only JSONL file that survives ``kill -9``.

Each result is one line written with a single ``write`` to a file opened with ``O_APPEND``, so a
killed process leaves either the whole line or, at worst, a torn last line without its newline.
Reading skips a torn tail (and the next append first cuts it off) and keeps the first result of
each key, so a resumed run holds exactly one result per key.

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
from pathlib import Path
from typing import Any

from ..errors import InputError

RESULTS = "results.jsonl"
MANIFEST = "run.json"


def result_key(**parts: Any) -> str:
    """A stable hash of the parts that identify a result (canonical JSON, SHA-1).

    >>> result_key(task="kv", example="e1", position=0) == result_key(position=0, example="e1", task="kv")
    True
    """
    return hashlib.sha1(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class Store:
    """Results of one run directory: ``results.jsonl`` and the ``run.json`` manifest."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.path = self.dir / RESULTS
        self._lock = threading.Lock()
        self._checked_tail = False

    def _repair_tail(self) -> None:
        """Cut off a torn last line (a write killed mid-way) so the next line starts clean."""
        if self._checked_tail or not self.path.exists():
            self._checked_tail = True
            return
        with open(self.path, "rb+") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size:
                fh.seek(max(0, size - 65536))
                tail = fh.read()
                if not tail.endswith(b"\n"):
                    cut = tail.rfind(b"\n")
                    keep = size - len(tail) + cut + 1 if cut >= 0 else (0 if size <= 65536 else None)
                    if keep is None:
                        raise InputError(f"{self.path} ends in a line longer than 64 KiB without a newline")
                    fh.truncate(keep)
        self._checked_tail = True

    def append(self, record: dict[str, Any]) -> None:
        """Append one result as one line, in one write."""
        line = (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        with self._lock:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._repair_tail()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)

    def load(self) -> list[dict[str, Any]]:
        """Every complete result, first one per key, in the order written."""
        if not self.path.exists():
            return []
        out, seen = [], set()
        with open(self.path, "rb") as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break  # torn tail of a killed write
                try:
                    rec = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and rec.get("key") not in seen:
                    seen.add(rec.get("key"))
                    out.append(rec)
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
        path = self.dir / MANIFEST
        if not path.exists():
            return {}
        return json.loads(path.read_text(encoding="utf-8"))
