"""``hybrid``: dense cosine plus normalised BM25, fused by weighted scores (extra ``models``).

Plain reciprocal-rank fusion of BM25 and dense ranks is *worse* than dense alone on NQ (BM25's
@2 is far below dense's, and RRF weighs the two rank lists equally). So the default fusion keeps
the dense cosine on its own scale and adds a small weight of BM25 min-max normalised over the
request: ``cos + WEIGHT * (bm25 - min) / (max - min)``. ``WEIGHT`` (0.08) was tuned on rows
1000-1999 of the NQ-open dev file (``python benchmarks/relevance.py tune``), where it beat dense
alone; on rows 0-999, where BENCHMARKS.md reports it, it ties with dense (recall@2 0.986 for both)
while plain RRF falls to 0.923. ``hybrid:rrf`` gives plain RRF (k=60) for comparison and
``hybrid:W`` a chosen weight.

>>> from edgewise.score import get_scorer
>>> s = get_scorer("hybrid")
>>> a, b = s.score("capital of france", ["Paris is the capital of France.", "Bananas are yellow."])
>>> a > b
True
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigError
from . import scorer
from .bm25 import BM25
from .dense import DenseScorer, shared_dense

WEIGHT = 0.08  # tuned on NQ dev rows 1000-1999; see BENCHMARKS.md "Relevance"
RRF_K = 60


def minmax(xs: Sequence[float]) -> list[float]:
    """Scale to [0, 1] over the list; a constant list maps to zeros.

    >>> minmax([2.0, 4.0, 3.0])
    [0.0, 1.0, 0.5]
    """
    lo, hi = min(xs, default=0.0), max(xs, default=0.0)
    if hi <= lo:
        return [0.0] * len(xs)
    return [(x - lo) / (hi - lo) for x in xs]


def rrf(*score_lists: Sequence[float], k: int = RRF_K) -> list[float]:
    """Reciprocal-rank fusion: sum of ``1 / (k + rank)`` over the lists (rank 1 is best).

    >>> [round(x, 4) for x in rrf([3.0, 1.0], [0.1, 0.9])]
    [0.0325, 0.0325]
    """
    out = [0.0] * len(score_lists[0])
    for scores in score_lists:
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        for rank, i in enumerate(order, 1):
            out[i] += 1.0 / (k + rank)
    return out


class HybridScorer:
    """Dense cosine fused with request-normalised BM25 (``weight``), or plain RRF (``mode="rrf"``)."""

    name = "hybrid"

    def __init__(self, weight: float = WEIGHT, *, mode: str = "weighted", dense: DenseScorer | None = None) -> None:
        if mode not in ("weighted", "rrf"):
            raise ConfigError(f"hybrid mode must be 'weighted' or 'rrf', but got {mode!r}")
        if not 0.0 <= weight <= 10.0:
            raise ConfigError(f"hybrid weight must be in [0, 10], but got {weight!r}")
        self.weight = weight
        self.mode = mode
        self.dense = dense
        self.bm25 = BM25()

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        dense = (self.dense or shared_dense()).score(query, texts)
        lexical = self.bm25.score(query, texts)
        return self.fuse(dense, lexical)

    def fuse(self, dense: Sequence[float], lexical: Sequence[float]) -> list[float]:
        """The fused scores from the two scorers' raw scores."""
        if self.mode == "rrf":
            return rrf(dense, lexical)
        return [d + self.weight * b for d, b in zip(dense, minmax(lexical))]


@scorer("hybrid")
def _make_hybrid(arg: str | None) -> HybridScorer:
    if not arg:
        return HybridScorer()
    if arg == "rrf":
        return HybridScorer(mode="rrf")
    try:
        weight = float(arg)
    except ValueError:
        raise ConfigError(f"hybrid takes 'rrf' or a BM25 weight (hybrid:0.1), but got hybrid:{arg}") from None
    return HybridScorer(weight)
