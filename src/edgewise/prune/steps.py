"""Pruning and highlighting: chunks cut down to the sentences that answer a query.

Three steps, one module each: :mod:`edgewise.prune.sentences` splits a text into exact sentence spans,
:mod:`edgewise.prune.scores` gives each sentence its probability of answering the query (the
MiniLM head with the ``models`` extra, a lexical head without), and this module keeps or marks the
best of them (:func:`prune_step` is pruning as the packer runs it, ``prune=``). Summaries, which
pack the best sentences under a cap, are :mod:`edgewise.prune.summaries`.

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

from ..checks import check_number
from ..chunk import Chunk
from .scores import DEFAULT_RELATIVE_THRESHOLD, DEFAULT_THRESHOLD, score_sentences, score_sentences_many
from .sentences import Span, join_spans, split_sentences

__all__ = [
    "DEFAULT_RELATIVE_THRESHOLD", "DEFAULT_THRESHOLD", "Pruned", "Span", "highlight", "join_spans", "prune",
    "prune_chunk", "prune_step", "score_sentences", "score_sentences_many", "split_sentences",
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


def prune_step(
    query: str, chunks: Sequence[Chunk], threshold: float, *, relative: bool = False, scorer: str = "auto"
) -> tuple[list[Chunk], list[dict[str, Any]]]:
    """Each chunk cut to the sentences that help the query; a record for each one that lost text.
    All the chunks' sentences go through the sentence model in one call.

    >>> chunks = [Chunk(id="a", text="Bananas are yellow. Paris is the capital."), Chunk(id="b", text="Paris.")]
    >>> kept, records = prune_step("capital of france", chunks, 0.3, scorer="lexical")
    >>> [c.text for c in kept], [(r["id"], r["original_chars"], r["kept_chars"]) for r in records]
    (['Paris is the capital.', 'Paris.'], [('a', 41, 21)])
    """
    out, records = [], []
    for chunk, result in zip(chunks, prune(query, chunks, threshold, relative=relative, scorer=scorer)):
        if result.text != chunk.text:
            chunk = result.apply(chunk)
            records.append({"id": chunk.id, "original_chars": chunk.meta["prune"]["original_chars"],
                            "kept_chars": len(chunk.text), "score": chunk.meta["prune"]["score"]})
        out.append(chunk)
    return out, records


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
