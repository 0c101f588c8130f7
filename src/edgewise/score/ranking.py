"""Ranking: chunks best first, scored by a scorer when asked or when scores are missing.

>>> from edgewise.chunk import Chunk
>>> ranked, by = rank("capital of france", [Chunk("a", "Bananas."), Chunk("b", "Paris is the capital of France.")], "bm25")
>>> [c.id for c in ranked], by
(['b', 'a'], 'bm25')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..chunk import Chunk
from ..errors import InputError
from . import Scorer, get_scorer


def scored_text(chunk: Chunk) -> str:
    """What a scorer reads: the record key (``meta.key``, as in the ``kv`` layout), title and text."""
    key = chunk.meta.get("key")
    return "\n".join(part for part in (key if isinstance(key, str) else None, chunk.title, chunk.text) if part)


def score_chunks(query: str, chunks: Sequence[Chunk], scorer: str | Scorer) -> list[float]:
    """Each chunk's score under ``scorer``, reading what :func:`scored_text` gives (what ``pack`` ranks by)."""
    use = get_scorer(scorer)
    return [float(s) for s in use.score(query, [scored_text(c) for c in chunks])]


def rank(
    query: str, chunks: Sequence[Chunk], scorer: str | Scorer | None = None, *, rescore: bool = False
) -> tuple[list[Chunk], str]:
    """Chunks best first (ties keep input order), scoring them when asked or when scores are missing.

    Returns the ranked chunks (with the scores used) and the name of what ranked them.
    """
    missing = [c.id for c in chunks if c.score is None]
    use = None if scorer in (None, "given") else get_scorer(scorer)
    if use is not None and (rescore or missing):
        scores = use.score(query, [scored_text(c) for c in chunks])
        chunks = [replace(c, score=float(s)) for c, s in zip(chunks, scores)]
        by = use.name
    elif missing and len(missing) < len(chunks):
        raise InputError(
            f"scores must be given for every chunk or for none, but chunk {missing[0]!r} has none; "
            "pass scorer='bm25' (CLI: --scorer bm25) to score them all"
        )
    elif missing:
        return list(chunks), "input order"
    else:
        by = "given"
    return sorted(chunks, key=_score, reverse=True), by  # a stable sort: ties keep input order


def _score(chunk: Chunk) -> float:
    return chunk.score  # type: ignore[return-value] - every chunk has one here
