"""BM25: the lexical scorer of the core, and the one BM25 of the package.

The variant is Okapi BM25 with Lucene's non-negative idf (in the nomenclature of Kamphuis et al.,
ECIR 2020, that bm25s follows: ``method="atire"``, ``idf_method="lucene"``; Lucene's own
``BM25Similarity`` before 8.0, without its lossy length encoding)::

    idf(t)       = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5))
    score(q, d)  = sum over the query's terms t (repeats count) of
                   idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

with ``k1 = 1.5`` and ``b = 0.75``. The idf never goes negative, which matters here: the
collection is often a single request's few chunks, where a term in most of them would get a
negative Robertson idf. Terms are lower-cased ``\\w+`` words without stopwords (:func:`terms`).
``tests/score/test_bm25.py`` checks the scores against ``rank_bm25`` on real NaturalQuestions passages.

:class:`BM25Index` is built once over a collection and queried many times (the distractor miner
of :mod:`edgewise.eval.nq`); :class:`BM25` is the scorer over one request's chunks, whose
collection statistics (document frequencies, average length) are those chunks', which is what a
reranker over one retrieval result can know.

>>> s = BM25().score("tidewater compaction", ["compaction stalled in tidewater", "backup restore"])
>>> s[0] > s[1] == 0.0
True
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from ..checks import check_number
from ..errors import ConfigError
from . import scorer

_WORD = re.compile(r"\w+", re.UNICODE)
# Function words carry no evidence of relevance; keeping them only adds noise to short queries.
STOPWORDS = frozenset(
    """a an and are as at be by did do does for from had has have how i in is it its of on or
    that the their this to was were what when where which who whom why will with you your""".split()
)
K1 = 1.5
B = 0.75


def terms(text: str) -> list[str]:
    """Lower-cased word tokens without stopwords.

    >>> terms("Who wrote The Hobbit, in 1937?")
    ['wrote', 'hobbit', '1937']
    """
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def _check_params(k1: float, b: float) -> None:
    check_number("BM25 k1", k1, low=0, what="a finite number >= 0", error=ConfigError)
    check_number("BM25 b", b, low=0, high=1, what="a number in [0, 1]", error=ConfigError)


class BM25Index:
    """An inverted BM25 index over ``texts``: built once, queried many times.

    >>> index = BM25Index(["the cat sat", "the dog sat", "a bird"])
    >>> round(index.idf("cat"), 4), index.idf("fish")
    (0.9808, 0.0)
    >>> [round(s, 4) for s in index.scores("cat sat")]
    [1.331, 0.4312, 0.0]
    >>> {j: round(s, 4) for j, s in index.matches("cat").items()}
    {0: 0.8998}
    """

    def __init__(self, texts: Sequence[str], *, k1: float = K1, b: float = B) -> None:
        _check_params(k1, b)
        self.k1 = k1
        self.b = b
        self.size = len(texts)
        counts = [Counter(terms(t)) for t in texts]
        lengths = [sum(c.values()) for c in counts]
        avg = (sum(lengths) / self.size if self.size else 0.0) or 1.0  # only empty documents: no term matches
        # per term: (document, saturated and length-normalised term frequency), the query-independent part
        self._postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for j, (c, length) in enumerate(zip(counts, lengths)):
            norm = k1 * (1 - b + b * length / avg)
            for t, tf in c.items():
                self._postings[t].append((j, tf * (k1 + 1) / (tf + norm)))
        n = self.size
        self._idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self._postings.items()}

    def __len__(self) -> int:
        return self.size

    def idf(self, term: str) -> float:
        """The idf of one (already tokenised) term; 0.0 for a term in no document."""
        return self._idf.get(term, 0.0)

    def matches(self, query: str | Sequence[str]) -> dict[int, float]:
        """``{document index: score}`` for the documents holding at least one of the query's terms.

        ``query`` is a text (tokenised by :func:`terms`) or its terms, already tokenised: pass
        ``list(dict.fromkeys(terms(text)))`` to count each distinct term once.
        """
        acc: dict[int, float] = defaultdict(float)
        for t in terms(query) if isinstance(query, str) else query:
            idf = self._idf.get(t)
            if idf is None:
                continue
            for j, w in self._postings[t]:
                acc[j] += idf * w
        return dict(acc)

    def scores(self, query: str | Sequence[str]) -> list[float]:
        """The score of every document, in input order (0.0 where no query term occurs); ``query``
        as for :meth:`matches`."""
        out = [0.0] * self.size
        for j, s in self.matches(query).items():
            out[j] = s
        return out


class BM25:
    """The ``bm25`` scorer: :class:`BM25Index` over the chunks of each request (see the module docstring)."""

    name = "bm25"

    def __init__(self, k1: float = K1, b: float = B) -> None:
        _check_params(k1, b)
        self.k1 = k1
        self.b = b

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return BM25Index(texts, k1=self.k1, b=self.b).scores(query)


@scorer("bm25")
def _make_bm25(arg: str | None) -> BM25:
    if arg:
        raise ConfigError(f"the bm25 scorer takes no argument, but got bm25:{arg}")
    return BM25()
