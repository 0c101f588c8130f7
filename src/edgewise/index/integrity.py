"""What keeps a damaged store from being served: a checksum per chunk and a manifest of the store's files.

Lance keeps no checksums of its own: bytes overwritten in place, a file's length unchanged, are read
as they are. So edgewise keeps two:

- **per chunk**, a ``checksum`` column: BLAKE2b-128 of the chunk's fields (id, file, title, offsets,
  page, text, token count, file hash) and its vector's float32 bytes, computed when the chunk is
  written (:func:`row_checksum`). ``retrieve`` and ``ask`` check every chunk they serve; ``index``
  checks every chunk when the manifest cannot vouch for the files (see below), and on a store at a URL
  (50,000 chunks: 1.3 s);
- **per file**, ``edgewise-manifest.json`` in a local store's folder: the size and SHA-256 of every
  file of its three tables and each table's version, written atomically (a temporary file, then a
  rename) at the end of each ``index`` run that wrote (:func:`write_manifest`). Lance never rewrites
  a file it wrote (data, deletion, index, version and transaction files are written once), except
  its ``latest_version_hint.json``, which is left out, and the version files of a table dropped and
  made again (``--rebuild`` removes the manifest before it drops anything). ``index`` hashes every
  recorded file before it trusts the store (50,000 chunks are 161 MB: 0.14 s); ``retrieve`` and
  ``ask`` compare their sizes (a ``stat`` each), after the store's settings are read.

A run that writes first marks the manifest unfinished (``"complete": false``); one stopped before it
finished leaves it so, and the next run then checks every chunk against its checksum, rebuilds the
search index and records the files anew. A manifest whose table versions are not the tables' (a
writer other than ``edgewise index`` was there) is treated the same way. A store written before
checksums were kept (its chunks have no ``checksum`` column) is still read; its chunks are not
verified, which ``index`` and ``retrieve`` say, and ``--rebuild`` adds them.

>>> row_checksum(("a:0", "/a.txt", "", 0, 5, None, "Hello", 1, "00"), bytes(8))
'd37ff86e571069f9403ba36b0c482bca'
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "edgewise-manifest.json"
MANIFEST_FORMAT = 1
COLUMN = "checksum"
# Lance rewrites this one in place at every commit (a hint; the version files are the record)
MUTABLE = frozenset({"latest_version_hint.json"})
_PIECE = 1 << 20


def row_checksum(fields: Sequence[Any], vector: bytes) -> str:
    """The checksum of one chunk: its fields (``id, source, title, start, end, page, text, tokens,
    sha256``, in that order) as JSON, then its vector's little-endian float32 bytes."""
    head = json.dumps(list(fields), separators=(",", ":")).encode("ascii")
    return hashlib.blake2b(head + b"\0" + vector, digest_size=16).hexdigest()


def row_checksums(columns: Sequence[Sequence[Any]], vectors: Any) -> list[str]:
    """:func:`row_checksum` of each row: ``columns`` are the fields' columns, ``vectors`` an
    ``(n, dim)`` float32 array."""
    import numpy as np

    block = np.ascontiguousarray(vectors, dtype="<f4")
    return [row_checksum(fields, block[i].tobytes()) for i, fields in enumerate(zip(*columns))]


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(_PIECE):
            h.update(piece)
    return h.hexdigest()


@dataclass
class Manifest:
    """What ``index`` recorded of a local store's files when it last finished writing."""

    complete: bool
    versions: dict[str, int]
    files: dict[str, tuple[int, str]] = field(default_factory=dict)  # path under the store -> (size, sha256)

    def to_json(self) -> str:
        return json.dumps({"format": MANIFEST_FORMAT, "complete": self.complete, "versions": self.versions,
                           "files": {p: [s, h] for p, (s, h) in sorted(self.files.items())}}, indent=0)


def table_files(root: Path, tables: Iterable[str]) -> Iterable[tuple[str, Path]]:
    """Every file of the store's tables (as its path under ``root``, and its path), but the ones Lance rewrites."""
    for table in tables:
        folder = root / f"{table}.lance"
        if not folder.is_dir():
            continue
        for base, _, names in os.walk(folder):
            for name in sorted(names):
                if name not in MUTABLE:
                    path = Path(base) / name
                    yield path.relative_to(root).as_posix(), path


def read_manifest(root: Path) -> Manifest | None:
    """The store's manifest, None if it has none; a ``ValueError`` if it cannot be read."""
    path = root / MANIFEST
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
        if data.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format {data.get('format')!r}, not {MANIFEST_FORMAT}")
        files = {str(p): (int(s), str(h)) for p, (s, h) in data["files"].items()}
        return Manifest(bool(data["complete"]), {str(k): int(v) for k, v in data["versions"].items()}, files)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"its manifest {path} cannot be read ({type(exc).__name__}: {str(exc)[:100]})") from None


def write_manifest(root: Path, manifest: Manifest) -> None:
    """Write the manifest atomically: a reader sees the old one or the new one, never a part."""
    fd, tmp = tempfile.mkstemp(prefix=f".{MANIFEST}.", dir=root)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(manifest.to_json())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, root / MANIFEST)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_manifest(root: Path) -> None:
    (root / MANIFEST).unlink(missing_ok=True)


def size_problem(root: Path, manifest: Manifest) -> str | None:
    """The first recorded file whose size is not the size written (a file gone is not looked at:
    Lance removes old versions' files when it compacts)."""
    for rel, (size, _) in manifest.files.items():
        try:
            now = (root / rel).stat().st_size
        except FileNotFoundError:
            continue
        if now != size:
            return f"file {root / rel} is {now:,} bytes, but {size:,} were written"
    return None


def file_problem(root: Path, manifest: Manifest, *, strict: bool, verified: dict[str, tuple[int, str]]) -> str | None:
    """The first recorded file whose size or SHA-256 is not what was written; with ``strict`` (the
    manifest is the tables' last word) a recorded file that is gone too. Files found intact are
    added to ``verified``."""
    problem = size_problem(root, manifest)
    if problem:
        return problem
    for rel, (size, digest) in manifest.files.items():
        path = root / rel
        try:
            now = file_sha256(path)
        except FileNotFoundError:
            if strict:
                return f"file {path} is missing"
            continue
        if now != digest:
            return f"file {path} holds other bytes than were written to it (its SHA-256 differs from the one recorded)"
        verified[rel] = (size, digest)
    return None


def snapshot(root: Path, tables: Iterable[str], versions: Mapping[str, int],
             known: Mapping[str, tuple[int, str]]) -> Manifest:
    """A complete manifest of the store's files now (those in ``known``, verified this run, not hashed again)."""
    files: dict[str, tuple[int, str]] = {}
    for rel, path in table_files(root, tables):
        size = path.stat().st_size
        k = known.get(rel)
        files[rel] = k if k is not None and k[0] == size else (size, file_sha256(path))
    return Manifest(True, dict(versions), files)


__all__ = ["COLUMN", "MANIFEST", "Manifest", "file_problem", "read_manifest", "remove_manifest", "row_checksum",
           "row_checksums", "size_problem", "snapshot", "write_manifest"]
