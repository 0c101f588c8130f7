"""``edgewise index``: files → documents → token-aware chunks → MiniLM vectors → the store, incrementally.

Each file is keyed by its resolved path and hashed (SHA-256 of its bytes): a file whose hash the
store already holds is skipped, a changed file's chunks are replaced, and the chunks of a file that
is gone from a folder being indexed are removed. Files are known by their absolute path (symlinks
kept, as the user sees them). Only regular files are read, each within ``max_file_bytes`` (a FIFO, a
device, a socket or a symlink to one is never opened, a larger file is never read). A file that
cannot be read is reported (one line, the file and the reason) and every other file is still indexed.

One run writes to a store at a time (:class:`~edgewise.index.lock.WriteLock`): a second waits up to
``lock_timeout`` seconds for the first to finish. Each run first checks the store: its bytes are the
ones written (:meth:`~edgewise.index.lance.LanceStore.verify`: the files' sizes and hashes recorded by
the last run, or every chunk's checksum; :mod:`.integrity`), else the run stops with one line naming
the damage and the command that rebuilds the store; then a file whose chunks are doubled or out of
step with its record (:meth:`~edgewise.index.lance.LanceStore.audit`) is repaired (its chunks written
again from the file, or removed if it is gone). The run ends by recording the store's files anew
(:meth:`~edgewise.index.lance.LanceStore.seal`).

Embedding is most of the time (a 1 MB text is ~650 chunks, about a minute on two cores): chunks are
embedded :data:`EMBED_BATCH` at a time, and ``progress`` shows a bar counting them on stderr
(``None``: only when stderr is a terminal, and only once the run has taken :data:`BAR_DELAY` seconds).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..checks import check_int
from ..errors import InputError
from ..tokens.tokenizers import get_tokenizer
from .chunking import check_sizes, split_text
from .lance import open_store
from .lock import WriteLock
from .readers import MAX_BYTES, SUFFIXES, check_file, kind_of, parse_document, read_pieces
from .store import FORMAT, Row, Settings, Store

EMBED_BATCH = 32  # chunks per call to the model: the progress bar moves every few seconds on 2 cores
WRITE_ROWS = 1024  # chunks embedded and written to the store at once
BAR_DELAY = 2.0  # seconds before the bar shows on a terminal: a short run prints only its summary


@dataclass
class Report:
    """What one ``index`` run did: files added, updated, unchanged, removed; chunks written; failures."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    repaired: list[tuple[str, str]] = field(default_factory=list)  # (path, what was wrong and what was done)
    chunks: int = 0
    total_chunks: int = 0
    notes: list[str] = field(default_factory=list)  # what the store check could not vouch for, or did besides

    def to_dict(self) -> dict[str, Any]:
        return {"added": self.added, "updated": self.updated, "unchanged": self.unchanged, "removed": self.removed,
                "failed": [{"path": p, "reason": r} for p, r in self.failed],
                "repaired": [{"path": p, "reason": r} for p, r in self.repaired], "chunks_written": self.chunks,
                "chunks_in_store": self.total_chunks, "notes": self.notes}

    def summary(self) -> str:
        repaired = f", {len(self.repaired)} repaired" if self.repaired else ""
        return (f"indexed {len(self.added)} new and {len(self.updated)} changed files ({self.chunks} chunks); "
                f"{len(self.unchanged)} unchanged, {len(self.removed)} removed{repaired}, {len(self.failed)} failed; "
                f"{self.total_chunks} chunks in the store")


def find_files(paths: Sequence[str | Path], max_bytes: int = MAX_BYTES) -> tuple[list[Path], list[Path],
                                                                                list[tuple[str, str]]]:
    """Files to index under ``paths`` (folders walked, hidden entries skipped), the folders walked,
    and the paths that cannot be indexed with the reason (a file of a kind edgewise reads that is
    not a regular file, or is larger than ``max_bytes``, among them: checked, not opened)."""
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
            for f in found:
                _add_checked(f, files, bad, max_bytes)
        elif os.path.exists(p):
            if kind_of(p) is None:
                bad.append((str(p), f"unsupported file type {p.suffix or '(none)'!r}"))
            else:
                _add_checked(p, files, bad, max_bytes)
        else:
            bad.append((str(p), "no such file or folder"))
    return list(dict.fromkeys(files)), roots, bad


def _add_checked(path: Path, files: list[Path], bad: list[tuple[str, str]], max_bytes: int) -> None:
    try:
        check_file(path, max_bytes)
    except InputError as exc:
        bad.append((str(path), str(exc).removeprefix(f"{path}: ")))
        return
    files.append(_absolute(path))


def _as_given(failed: Sequence[tuple[str, str]], paths: Sequence[str | Path]) -> list[tuple[str, str]]:
    """``failed`` with each path as the user gave it: a file under a given folder is that folder, as
    given, joined with the file's path under it (a file that fails when read is known by its absolute
    path; one refused when checked, by the path the walk found).

    >>> _as_given([(os.path.abspath("docs/a/b.txt"), "binary"), ("docs/c.txt", "a FIFO")], ["./docs"])
    [('docs/a/b.txt', 'binary'), ('docs/c.txt', 'a FIFO')]
    """
    roots = [(str(Path(raw)), os.path.abspath(raw)) for raw in paths]
    out = []
    for path, why in failed:
        full = os.path.abspath(path)
        given = next((g if full == root else os.path.join(g, os.path.relpath(full, root)) for g, root in roots
                      if full == root or full.startswith(root.rstrip(os.sep) + os.sep)), path)
        out.append((given, why))
    return out


def _absolute(path: Path) -> Path:
    """The path a file is known by: absolute and normalised, symlinks kept (as the user sees it)."""
    return Path(os.path.abspath(path))


def _walk(root: Path) -> Iterable[Path]:
    for base, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            if not name.startswith("."):
                yield Path(base) / name


def file_hash(path: Path, max_bytes: int = MAX_BYTES) -> str:
    """SHA-256 of a regular file's bytes, read a piece at a time (an :class:`InputError` past ``max_bytes``)."""
    h = hashlib.sha256()
    for piece in read_pieces(path, max_bytes):
        h.update(piece)
    return h.hexdigest()


def index_paths(
    paths: Sequence[str | Path], store: str | Path, *, tokenizer: str = "cl100k_base", chunk_tokens: int = 256,
    overlap_tokens: int = 32, rebuild: bool = False, progress: bool | None = False,
    embed: Callable[[list[str]], Any] | None = None, max_file_bytes: int = MAX_BYTES, lock_timeout: float = 600.0,
    on_wait: Callable[[dict[str, Any]], None] | None = None,
) -> Report:
    """Index the files under ``paths`` into ``store`` (a folder, or a server URL); see the module doc.
    ``progress``: a bar on stderr (True), none (False), or one only on a terminal and after
    :data:`BAR_DELAY` seconds (None). ``on_wait`` is called once, with the holder's details, if the
    run has to wait for another's lock. A damaged store raises
    :class:`~edgewise.index.lance.StoreDamaged` (``rebuild=True`` makes it anew)."""
    check_sizes(chunk_tokens, overlap_tokens)
    check_int("max_file_bytes", max_file_bytes, minimum=1)
    if not paths:
        raise InputError("paths must name at least one file or folder, but got none")
    tok = get_tokenizer(tokenizer)
    settings = Settings(FORMAT, tok.name, chunk_tokens, overlap_tokens)
    with WriteLock(store, timeout=lock_timeout, on_wait=on_wait):
        db = open_store(store, settings=settings, create=True, rebuild=rebuild)
        note = db.verify()
        files, roots, failed = find_files(paths, max_file_bytes)
        report = Report(failed=list(failed), notes=[note] if note else [])
        damaged = _repair(db, files, report, max_file_bytes)
        todo, known = _changed(db, files, roots, report, max_file_bytes)
        _write(db, todo, known, damaged, report, tok, chunk_tokens, overlap_tokens, embed or default_embed(), progress,
               max_file_bytes)
        report.failed = _as_given(report.failed, paths)  # skipped when checked or when read: one form of path
        if report.chunks or report.removed or report.repaired or db.needs_finish:
            db.finish()
        db.seal()
        report.total_chunks = db.count()
    return report


def _repair(db: Store, files: list[Path], report: Report, max_bytes: int) -> set[str]:
    """Remove the chunks of every file the store holds wrongly (:meth:`audit`); those still readable
    are added to ``files``, to be written again. Returns their paths."""
    damaged = db.audit()
    if not damaged:
        return set()
    db.delete_sources(sorted(damaged))
    listed = {str(f) for f in files}
    for source, why in sorted(damaged.items()):
        if source not in listed:
            try:
                if kind_of(Path(source)) is None:
                    raise InputError(f"{source}: unsupported file type")
                check_file(source, max_bytes)
            except InputError as exc:
                gone = str(exc).removeprefix(f"{source}: ")
                report.repaired.append((source, f"{why}; its chunks were removed ({gone})"))
                continue
            files.append(Path(source))
        report.repaired.append((source, f"{why}; its chunks were removed, to be written again from the file"))
    return set(damaged)


def _changed(db: Store, files: list[Path], roots: list[Path], report: Report,
             max_bytes: int) -> tuple[list[tuple[Path, str]], dict[str, str]]:
    """The files whose content the store does not hold (with their hash), and what it holds;
    unchanged and gone files reported."""
    known = db.sources()
    todo: list[tuple[Path, str]] = []
    for f in files:
        try:
            digest = file_hash(f, max_bytes)
        except InputError as exc:
            report.failed.append((str(f), str(exc).removeprefix(f"{f}: ")))
            continue
        if known.get(str(f)) == digest:
            report.unchanged.append(str(f))
        else:
            todo.append((f, digest))
    gone = [s for s in known if any(_under(s, r) for r in roots) and not Path(s).exists()]
    if gone:
        db.delete_sources(gone)
        report.removed.extend(gone)
    return todo, known


def _write(db: Store, todo: list[tuple[Path, str]], known: dict[str, str], damaged: set[str], report: Report,
           tok: Any, size: int, overlap: int, embed: Callable[[list[str]], Any], progress: bool | None,
           max_bytes: int) -> None:
    """Read, chunk, embed and write ``todo``, :data:`WRITE_ROWS` chunks at a time."""
    bar = _Bar(len(todo), progress)
    pending: list[tuple[str, str, list[Row]]] = []  # read and chunked, not yet embedded and written

    def flush() -> None:
        rows = [r for _, _, group in pending for r in group]
        vectors: list[Any] = []
        for i in range(0, len(rows), EMBED_BATCH):  # batches across files: small files fill them too
            batch = rows[i:i + EMBED_BATCH]
            vectors.extend(embed([r.embed_text for r in batch]))
            bar.update(len(batch))
        it = iter(vectors)
        db.replace_sources([(s, h, [r.with_vector(next(it)) for r in group]) for s, h, group in pending])
        pending.clear()

    try:
        for n, (f, _) in enumerate(todo, 1):
            bar.file(n)
            try:
                digest, rows = _rows(f, tok, size, overlap, max_bytes)
            except InputError as exc:
                report.failed.append((str(f), str(exc).removeprefix(f"{f}: ")))
                continue
            bar.add(len(rows))
            pending.append((str(f), digest, rows))
            if str(f) not in damaged:
                (report.updated if str(f) in known else report.added).append(str(f))
            report.chunks += len(rows)
            if sum(len(group) for _, _, group in pending) >= WRITE_ROWS:
                flush()
        flush()
    finally:
        bar.close()


def _under(source: str, root: Path) -> bool:
    try:
        Path(source).relative_to(root)
        return True
    except ValueError:
        return False


def _rows(path: Path, tok: Any, size: int, overlap: int, max_bytes: int) -> tuple[str, list[Row]]:
    """The file's hash and chunks, from one read of its bytes (a file changed since it was hashed
    is stored as read now)."""
    data = b"".join(read_pieces(path, max_bytes))
    digest = hashlib.sha256(data).hexdigest()
    doc = parse_document(path, data)
    del data
    pieces = split_text(doc.text, tok, size=size, overlap=overlap)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem).strip("-")[:40] or "doc"
    return digest, [Row(id=f"{slug}-{digest[:6]}:{n}", source=str(path), title=doc.title, start=p.start, end=p.end,
                        page=doc.page_at(p.start), text=p.text, tokens=p.tokens, sha256=digest)
                    for n, p in enumerate(pieces)]


def default_embed() -> Callable[[list[str]], Any]:
    """The bundled MiniLM (loaded once per process): what chunks and questions are embedded with."""
    from ..score.dense import shared_dense

    model = shared_dense()
    return lambda texts: model.embed(texts)


class _Bar:
    """Chunks embedded of the chunks read so far (the total grows as files are read: a file's chunks
    are known once it is split), and which file of how many is being read."""

    def __init__(self, files: int, show: bool | None) -> None:
        self.files = files
        self._tqdm: Any = None
        if files and show is not False:
            from tqdm import tqdm

            # as eval's bars: stderr, only on a terminal unless asked (tqdm's disable=None); asked for, every
            # batch is shown (a log gets each step, the last one too)
            steps = {} if show is None else {"mininterval": 0, "miniters": 1}
            self._tqdm = tqdm(total=0, unit="chunk", desc="indexing", file=sys.stderr, dynamic_ncols=True,
                              leave=False, disable=None if show is None else False,
                              delay=BAR_DELAY if show is None else 0, **steps)

    def file(self, n: int) -> None:
        if self._tqdm is not None:
            self._tqdm.set_postfix_str(f"file {n}/{self.files}", refresh=False)

    def add(self, chunks: int) -> None:
        if self._tqdm is not None:
            self._tqdm.total += chunks  # shown at the next update (a refresh now would ignore BAR_DELAY)

    def update(self, chunks: int) -> None:
        if self._tqdm is not None:
            self._tqdm.update(chunks)

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()


__all__ = ["Report", "Store", "find_files", "index_paths"]
