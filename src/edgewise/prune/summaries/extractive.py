"""Extractive summaries (``summaries="auto"``): a chunk's most query-relevant sentences, in their
original order, within a token cap.

The sentences and their scores come from :mod:`edgewise.prune.sentences` and
:mod:`edgewise.prune.scores` (the MiniLM sentence model with the ``models`` extra, a lexical model
otherwise), as for pruning; the cap is counted exactly, on the final string.

>>> c = Chunk(id="a", text="Bananas are yellow. Paris is the capital of France. Lyon is big.")
>>> extractive_summary("capital of france", c, 8, "cl100k_base", scorer="lexical")
'Paris is the capital of France.'
"""

from __future__ import annotations

from collections.abc import Sequence

from ...checks import check_int
from ...chunk import Chunk
from ...tokens.tokenizers import Tokenizer, get_tokenizer
from ..scores import score_sentences_many
from ..sentences import Span, join_spans

__all__ = ["extractive_summaries", "extractive_summary"]


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
