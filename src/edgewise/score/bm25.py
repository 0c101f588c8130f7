"""Okapi BM25 over the chunks of one request: the lexical scorer of the core.

The collection statistics (document frequencies, average length) come from the chunks being
scored, which is what a reranker over one retrieval result can know.

>>> s = BM25().score("tidewater compaction", ["compaction stalled in tidewater", "backup restore"])
>>> s[0] > s[1] == 0.0
True
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from . import scorer

_WORD = re.compile(r"\w+", re.UNICODE)
# Function words carry no evidence of relevance; keeping them only adds noise to short queries.
STOPWORDS = frozenset(
    """a an and are as at be by did do does for from had has have how i in is it its of on or
    that the their this to was were what when where which who whom why will with you your""".split()
)


def terms(text: str) -> list[str]:
    """Lower-cased word tokens without stopwords."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


class BM25:
    """BM25 with the non-negative idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``."""

    name = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        docs = [Counter(terms(t)) for t in texts]
        if not docs:
            return []
        n = len(docs)
        lengths = [sum(d.values()) for d in docs]
        avg = (sum(lengths) / n) or 1.0
        df: Counter[str] = Counter()
        for d in docs:
            df.update(d.keys())
        query_terms = terms(query)
        out = []
        for d, length in zip(docs, lengths):
            total = 0.0
            norm = self.k1 * (1 - self.b + self.b * length / avg)
            for q in query_terms:
                tf = d.get(q)
                if tf:
                    idf = math.log(1 + (n - df[q] + 0.5) / (df[q] + 0.5))
                    total += idf * tf * (self.k1 + 1) / (tf + norm)
            out.append(total)
        return out


@scorer("bm25")
def _make_bm25(arg: str | None) -> BM25:
    return BM25()
