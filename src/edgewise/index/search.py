"""``edgewise retrieve`` and ``edgewise ask``: hybrid retrieval from the store, then edgewise packing.

Retrieval asks the store for the ``top_n × CANDIDATES`` best chunks by dense similarity (MiniLM
cosine) and by BM25 (the store's full-text index), fuses the two rankings with reciprocal-rank
fusion (``k = 60``), and keeps the ``top_n`` best. ``mode="dense"`` or ``"bm25"`` uses one ranking.
Each hit becomes an edgewise chunk whose score is its fused score and whose ``meta`` says where it
came from (``source``, ``title``, ``start``/``end`` character offsets, ``page``), so the packed
prompt and its debug info point back to the files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..checks import check_int, check_str
from ..errors import ConfigError
from ..packing.packer import Packed, Packer
from .build import default_embed
from .store import Row, Store

MODES = ("hybrid", "dense", "bm25")
TOP_N = 20  # hits retrieved when none is asked for (edgewise retrieve, POST /v1/retrieve)
RRF_K = 60
CANDIDATES = 2  # each ranking contributes top_n × this many candidates to the fusion


@dataclass(frozen=True)
class Hit:
    """A retrieved chunk: its row, its fused score, and its rank in each ranking (None: not in it)."""

    row: Row
    score: float
    dense_rank: int | None
    bm25_rank: int | None

    def chunk(self) -> dict[str, Any]:
        r = self.row
        meta = {"source": r.source, "start": r.start, "end": r.end, "dense_rank": self.dense_rank,
                "bm25_rank": self.bm25_rank}
        if r.page is not None:
            meta["page"] = r.page
        return {"id": r.id, "text": r.text, "title": r.title, "score": round(self.score, 6), "meta": meta}


def check_mode(mode: str) -> str:
    if check_str("mode", mode) not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, but got {mode!r}")
    return mode


def retrieve(store: Store, query: str, *, top_n: int = TOP_N, mode: str = "hybrid",
             embed: Callable[[list[str]], Any] | None = None) -> list[Hit]:
    """The ``top_n`` best chunks for ``query``, best first."""
    check_str("query", query)
    check_int("top_n", top_n, minimum=1)
    check_mode(mode)
    want = top_n * CANDIDATES if mode == "hybrid" else top_n
    dense: list[str] = []
    lexical: list[str] = []
    if mode in ("hybrid", "dense"):
        vector = (embed or default_embed())([query])[0]
        dense = store.dense(vector, want)
    if mode in ("hybrid", "bm25"):
        lexical = store.lexical(query, want)
    fused: dict[str, float] = {}
    for ranking in (dense, lexical):
        for r, cid in enumerate(ranking):
            fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + r + 1)
    best = sorted(fused, key=lambda c: -fused[c])[:top_n]
    rows = {row.id: row for row in store.get(best)}
    d_rank = {c: r for r, c in enumerate(dense)}
    l_rank = {c: r for r, c in enumerate(lexical)}
    return [Hit(rows[c], fused[c], d_rank.get(c), l_rank.get(c)) for c in best if c in rows]


def pack_hits(packer: Packer, query: str, hits: Sequence[Hit], **overrides: Any) -> Packed:
    """Pack the retrieved chunks for ``query`` with ``packer``'s options (scores are the fused ones
    unless the options ask a scorer to rescore)."""
    return packer.pack(query, [h.chunk() for h in hits], **overrides)


_CITE = re.compile(r"\[([^\[\]\n]{1,200})\]")


def cited(answer: str, ids: Sequence[str]) -> list[str]:
    """The ids of ``ids`` that ``answer`` cites in brackets (``[a]``, ``[a, b]``), in citing order.

    >>> cited("Paris [guide-1a2b3c:0, x] and [guide-1a2b3c:2].", ["guide-1a2b3c:0", "guide-1a2b3c:2"])
    ['guide-1a2b3c:0', 'guide-1a2b3c:2']
    """
    known = set(ids)
    out: list[str] = []
    for group in _CITE.findall(answer):
        for part in re.split(r"[,;]\s*|\s+", group):
            part = part.strip().strip("'\"`").removeprefix("id=").strip("'\"")
            if part in known and part not in out:
                out.append(part)
    return out
