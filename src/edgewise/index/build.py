"""``edgewise index``: files → documents → token-aware chunks → MiniLM vectors → the store, incrementally.

Each file is keyed by its resolved path and hashed (SHA-256 of its bytes): a file whose hash the
store already holds is skipped, a changed file's chunks are replaced, and the chunks of a file that
is gone from a folder being indexed are removed. Files are known by their absolute path (symlinks
kept, as the user sees them). A file that cannot be read is reported (one line,
the file and the reason) and every other file is still indexed.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..tokens import get_tokenizer
from .chunking import check_sizes, split_text
from .lance import open_store
from .readers import SUFFIXES, kind_of, read_document
from .store import FORMAT, Row, Settings, Store

EMBED_BATCH = 64
WRITE_ROWS = 1024  # chunks embedded and written to the store at once


@dataclass
class Report:
    """What one ``index`` run did: files added, updated, unchanged, removed; chunks written; failures."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    chunks: int = 0
    total_chunks: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"added": self.added, "updated": self.updated, "unchanged": self.unchanged, "removed": self.removed,
                "failed": [{"path": p, "reason": r} for p, r in self.failed], "chunks_written": self.chunks,
                "chunks_in_store": self.total_chunks}

    def summary(self) -> str:
        return (f"indexed {len(self.added)} new and {len(self.updated)} changed files ({self.chunks} chunks); "
                f"{len(self.unchanged)} unchanged, {len(self.removed)} removed, {len(self.failed)} failed; "
                f"{self.total_chunks} chunks in the store")


def find_files(paths: Sequence[str | Path]) -> tuple[list[Path], list[Path], list[tuple[str, str]]]:
    """Files to index under ``paths`` (folders walked, hidden entries skipped), the folders walked,
    and the paths that cannot be indexed with the reason."""
    files: list[Path] = []
    roots: list[Path] = []
    bad: list[tuple[str, str]] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            roots.append(_absolute(p))
            found = sorted(f for f in _walk(p) if kind_of(f))
            if not found:
                bad.append((str(p), f"no {'/'.join(sorted(set(SUFFIXES)))} files in this folder"))
            files.extend(_absolute(f) for f in found)
        elif p.is_file():
            if kind_of(p) is None:
                bad.append((str(p), f"unsupported file type {p.suffix or '(none)'!r}"))
            else:
                files.append(_absolute(p))
        else:
            bad.append((str(p), "no such file or folder"))
    return list(dict.fromkeys(files)), roots, bad


def _absolute(path: Path) -> Path:
    """The path a file is known by: absolute and normalised, symlinks kept (as the user sees it)."""
    return Path(os.path.abspath(path))


def _walk(root: Path) -> Iterable[Path]:
    for base, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            if not name.startswith("."):
                yield Path(base) / name


def file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def index_paths(
    paths: Sequence[str | Path], store: str | Path, *, tokenizer: str = "cl100k_base", chunk_tokens: int = 256,
    overlap_tokens: int = 32, rebuild: bool = False, progress: bool = False,
    embed: Callable[[list[str]], Any] | None = None,
) -> Report:
    """Index the files under ``paths`` into ``store`` (a folder, or a server URL); see the module doc."""
    check_sizes(chunk_tokens, overlap_tokens)
    if not paths:
        raise InputError("paths must name at least one file or folder, but got none")
    tok = get_tokenizer(tokenizer)
    settings = Settings(FORMAT, tok.name, chunk_tokens, overlap_tokens)
    db = open_store(store, settings=settings, create=True, rebuild=rebuild)
    files, roots, failed = find_files(paths)
    report = Report(failed=list(failed))
    known = db.sources()
    todo: list[tuple[Path, str]] = []
    for f in files:
        try:
            digest = file_hash(f)
        except OSError as exc:
            report.failed.append((str(f), f"cannot read the file ({exc.strerror or exc})"))
            continue
        if known.get(str(f)) == digest:
            report.unchanged.append(str(f))
        else:
            todo.append((f, digest))
    gone = [s for s in known if any(_under(s, r) for r in roots) and not Path(s).exists()]
    if gone:
        db.delete_sources(gone)
        report.removed.extend(gone)
    embed = embed or default_embed()
    bar = _bar(len(todo), progress)
    pending: list[tuple[str, str, list[Row]]] = []  # read and chunked, not yet embedded and written

    def flush() -> None:
        rows = [r for _, _, group in pending for r in group]
        vectors: list[Any] = []
        for i in range(0, len(rows), EMBED_BATCH):  # batches across files: small files fill them too
            vectors.extend(embed([r.embed_text for r in rows[i:i + EMBED_BATCH]]))
        it = iter(vectors)
        db.replace_sources([(s, h, [r.with_vector(next(it)) for r in group]) for s, h, group in pending])
        bar.update(len(pending))
        pending.clear()

    try:
        for f, digest in todo:
            try:
                rows = _rows(f, digest, tok, chunk_tokens, overlap_tokens)
            except InputError as exc:
                report.failed.append((str(f), str(exc).removeprefix(f"{f}: ")))
                bar.update(1)
                continue
            pending.append((str(f), digest, rows))
            (report.updated if str(f) in known else report.added).append(str(f))
            report.chunks += len(rows)
            if sum(len(group) for _, _, group in pending) >= WRITE_ROWS:
                flush()
        flush()
    finally:
        bar.close()
    if report.chunks or report.removed:
        db.finish()
    report.total_chunks = db.count()
    return report


def _under(source: str, root: Path) -> bool:
    try:
        Path(source).relative_to(root)
        return True
    except ValueError:
        return False


def _rows(path: Path, digest: str, tok: Any, size: int, overlap: int) -> list[Row]:
    doc = read_document(path)
    pieces = split_text(doc.text, tok, size=size, overlap=overlap)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem).strip("-")[:40] or "doc"
    return [Row(id=f"{slug}-{digest[:6]}:{n}", source=str(path), title=doc.title, start=p.start, end=p.end,
                page=doc.page_at(p.start), text=p.text, tokens=p.tokens, sha256=digest)
            for n, p in enumerate(pieces)]


def default_embed() -> Callable[[list[str]], Any]:
    """The bundled MiniLM (loaded once per process): what chunks and questions are embedded with."""
    from ..score.dense import shared_dense

    model = shared_dense()
    return lambda texts: model.embed(texts)


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(total: int, show: bool) -> Any:
    if not show or total == 0:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="file", desc="indexing", leave=False)


__all__ = ["Report", "Store", "find_files", "index_paths"]
