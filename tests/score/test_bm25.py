"""The core BM25 against an independent implementation (rank_bm25) on real NaturalQuestions passages.

As bm25s tests itself against rank_bm25: the same tokens go to both, with the same variant and
parameters. Ours is BM25 with Lucene's idf ``ln(1 + (N - n + 0.5) / (n + 0.5))`` and the
``(k1 + 1)`` term weight (bm25s ``method="atire", idf_method="lucene"``). rank_bm25 has no class
with that idf, so the reference is its ``BM25Okapi`` (same term weight, same length
normalisation, its own counting) with ``_calc_idf`` (the hook its BM25L and BM25Plus override)
set to Lucene's formula; everything else in the reference is rank_bm25's code.
"""

import math

import pytest

from edgewise.errors import ConfigError
from edgewise.score import get_scorer
from edgewise.score.bm25 import BM25, BM25Index, terms

REL = 1e-9


@pytest.fixture(scope="module")
def rank_bm25():
    return pytest.importorskip("rank_bm25", reason="the reference BM25 needs rank-bm25: pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def lucene_okapi(rank_bm25):
    """rank_bm25's Okapi BM25 with Lucene's idf instead of Robertson's floored one."""

    class LuceneIdfOkapi(rank_bm25.BM25Okapi):
        def _calc_idf(self, nd):
            self.idf = {w: math.log(1 + (self.corpus_size - n + 0.5) / (n + 0.5)) for w, n in nd.items()}

    return LuceneIdfOkapi


def _passages(rows):
    return [f"{r['ctxs'][0]['title']} {r['ctxs'][0]['text']}" for r in rows]


def _close(ours, ref):
    ref = [float(x) for x in ref]
    assert len(ours) == len(ref)
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(ours, ref)) if not math.isclose(a, b, rel_tol=REL, abs_tol=0.0)]
    assert bad == []


def test_index_scores_equal_rank_bm25_on_200_nq_passages(nq_rows, lucene_okapi):
    corpus = _passages(nq_rows)
    ours = BM25Index(corpus)
    ref = lucene_okapi([terms(t) for t in corpus], k1=1.5, b=0.75)
    nonzero = 0
    for r in nq_rows:
        got = ours.scores(r["question"])
        _close(got, ref.get_scores(terms(r["question"])))
        nonzero += sum(s > 0 for s in got)
        # the sparse form holds exactly the documents with a score
        assert ours.matches(r["question"]) == {j: s for j, s in enumerate(got) if s > 0}
        # pre-tokenised terms, here each distinct one once (how the NQ distractor miner queries)
        unique = list(dict.fromkeys(terms(r["question"])))
        _close(ours.scores(unique), ref.get_scores(unique))
    assert nonzero > 2000  # the queries really match: this compares scores, not zeros


def test_scorer_equals_rank_bm25_per_request(nq_rows, lucene_okapi):
    """The ``bm25`` scorer over 20-chunk requests (each request is its own collection), with
    repeated query terms and non-default parameters too."""
    corpus = _passages(nq_rows)
    for k1, b in ((1.5, 0.75), (0.9, 0.4), (2.0, 1.0)):
        scorer = BM25(k1, b)
        for start in range(0, 200, 20):
            texts = corpus[start : start + 20]
            ref = lucene_okapi([terms(t) for t in texts], k1=k1, b=b)
            for r in nq_rows[start : start + 20 : 5]:
                query = f"{r['question']} {r['question'].split()[-1]}"  # the last word twice
                _close(scorer.score(query, texts), ref.get_scores(terms(query)))


def test_ranking_equals_rank_bm25_okapi_where_no_idf_is_floored(nq_rows, rank_bm25):
    """Lucene's idf and Robertson's are both decreasing in the document frequency, so with
    unmodified ``BM25Okapi`` the single-term rankings agree; the scores differ by the idf ratio."""
    corpus = _passages(nq_rows)
    ours = BM25Index(corpus)
    okapi = rank_bm25.BM25Okapi([terms(t) for t in corpus], k1=1.5, b=0.75, epsilon=0.0)
    for word in ("nobel", "river", "season", "film", "war"):
        assert okapi.idf[word] > 0
        _close([s * okapi.idf[word] / ours.idf(word) for s in ours.scores(word)], okapi.get_scores([word]))


def test_edges():
    assert BM25().score("anything", []) == []
    assert BM25().score("the of and", ["a b c", "the cat"]) == [0.0, 0.0]  # a query of stopwords only
    expected = math.log(1 + 2.5 / 1.5) * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 3))  # N 3, n 1, |d| 1, avgdl 1/3
    assert BM25().score("cat", ["", "   ", "cat"]) == [0.0, 0.0, pytest.approx(expected, rel=1e-12)]
    index = BM25Index([])
    assert (len(index), index.scores("x"), index.matches("x")) == (0, [], {})
    assert BM25Index(["", ""]).scores("x") == [0.0, 0.0]


def test_bad_parameters_name_the_rule_and_the_value():
    with pytest.raises(ConfigError, match=r"^BM25 k1 must be a finite number >= 0, but got -1$"):
        BM25(k1=-1)
    with pytest.raises(ConfigError, match=r"^BM25 b must be a number in \[0, 1\], but got 1.5$"):
        BM25Index(["x"], b=1.5)
    with pytest.raises(ConfigError, match=r"^the bm25 scorer takes no argument, but got bm25:2$"):
        get_scorer("bm25:2")
