"""Sentences that help a query: split, score, prune, highlight, summarise.

- :mod:`~edgewise.prune.sentences`: a text's sentences as exact spans;
- :mod:`~edgewise.prune.scores`: each sentence's probability of answering the query;
- :mod:`~edgewise.prune.steps`: pruning and highlighting of chunks (``prune=``);
- :mod:`~edgewise.prune.summaries`: summaries of chunks, extractive and written by an LLM (``summaries=``).
"""

from .steps import (
    DEFAULT_RELATIVE_THRESHOLD,
    DEFAULT_THRESHOLD,
    Pruned,
    Span,
    highlight,
    join_spans,
    prune,
    prune_chunk,
    score_sentences,
    score_sentences_many,
    split_sentences,
)
from .summaries import extractive_summaries, extractive_summary

__all__ = [
    "DEFAULT_RELATIVE_THRESHOLD", "DEFAULT_THRESHOLD", "Pruned", "Span", "extractive_summaries", "extractive_summary",
    "highlight", "join_spans", "prune", "prune_chunk", "score_sentences", "score_sentences_many", "split_sentences",
]
