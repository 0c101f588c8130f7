"""Pruning, highlighting and extractive summaries: chunks cut down to the sentences that answer a query.

Three steps, one module each: :mod:`edgewise.prune.sentences` splits a text into exact sentence spans,
:mod:`edgewise.prune.scores` gives each sentence its probability of answering the query (the
MiniLM head with the ``models`` extra, a lexical head without), and this module keeps, marks or
packs the best of them. The names a caller needs are importable from here.

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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..checks import check_int, check_number
from ..chunk import Chunk
from ..tokens.tokenizers import Tokenizer, get_tokenizer
from .scores import DEFAULT_RELATIVE_THRESHOLD, DEFAULT_THRESHOLD, score_sentences, score_sentences_many
from .sentences import Span, join_spans, split_sentences

__all__ = [
    "DEFAULT_RELATIVE_THRESHOLD", "DEFAULT_THRESHOLD", "Pruned", "Span", "extractive_summaries", "extractive_summary",
    "highlight", "join_spans", "prune", "prune_chunk", "score_sentences", "score_sentences_many", "split_sentences",
]


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


def _check_threshold(threshold: float) -> None:
    check_number("threshold", threshold, low=0, high=1, what="a number in [0, 1]")


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
    return prune(query, [chunk], threshold, relative=relative, scorer=scorer)[0]


def prune(
    query: str, chunks: Sequence[Chunk], threshold: float = DEFAULT_THRESHOLD, *, relative: bool = False,
    scorer: str = "auto",
) -> list[Pruned]:
    """:func:`prune_chunk` over many chunks, with every sentence of every chunk scored in one model
    call (sorted by length and batched across chunks); the result for each chunk is the same as
    :func:`prune_chunk` gives for it alone.

    >>> [p.text for p in prune("capital of france", [Chunk(id="a", text="Bananas are yellow. Paris is the capital."),
    ...                                               Chunk(id="b", text="")], 0.3, scorer="lexical")]
    ['Paris is the capital.', '']
    """
    _check_threshold(threshold)
    scored = score_sentences_many(query, [(c.text, c.title) for c in chunks], scorer=scorer)
    return [_pruned(c, sentences, threshold, relative) for c, sentences in zip(chunks, scored)]


def _pruned(chunk: Chunk, sentences: Sequence[Span], threshold: float, relative: bool) -> Pruned:
    if not sentences:
        return Pruned(chunk.text, (), 0.0, ())
    kept = _select(sentences, threshold, relative)
    return Pruned(join_spans(chunk.text, kept), tuple(kept), max(s.score for s in sentences), tuple(sentences))


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
    return extractive_summaries(query, [chunk], max_tokens, tokenizer, scorer=scorer)[0]


def extractive_summaries(
    query: str, chunks: Sequence[Chunk], max_tokens: int, tokenizer: str | Tokenizer = "cl100k_base", *,
    scorer: str = "auto",
) -> list[str]:
    """:func:`extractive_summary` for each chunk, with all their sentences scored in one model call.

    >>> extractive_summaries("capital of france", [Chunk(id="a", text="Lyon is big. Paris is the capital.")], 6,
    ...                      scorer="lexical")
    ['Paris is the capital.']
    """
    check_int("max_tokens", max_tokens, minimum=1)
    tok = get_tokenizer(tokenizer)
    scored = score_sentences_many(query, [(c.text, c.title) for c in chunks], scorer=scorer)
    return [_summary(c, sentences, max_tokens, tok) for c, sentences in zip(chunks, scored)]


def _summary(chunk: Chunk, sentences: Sequence[Span], max_tokens: int, tok: Tokenizer) -> str:
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
