"""The condensing steps of :func:`edgewise.pack`: prune chunks to the sentences that help the query,
and write extractive summaries for the chunks that may have to go in short (LLM summaries, from
the same :func:`summary_targets`, are :mod:`edgewise.prune.llm_summaries`).

Both read sentences with :mod:`edgewise.prune.steps` (the MiniLM sentence model with the ``models`` extra,
a lexical model otherwise) and return new chunks; nothing is dropped here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..chunk import Chunk
from ..tokens.tokenizers import Tokenizer


def prune_step(
    query: str, chunks: Sequence[Chunk], threshold: float, *, relative: bool = False, scorer: str = "auto"
) -> tuple[list[Chunk], list[dict[str, Any]]]:
    """Each chunk cut to the sentences that help the query; a record for each one that lost text.
    All the chunks' sentences go through the sentence model in one call."""
    from .steps import prune

    out, records = [], []
    for chunk, result in zip(chunks, prune(query, chunks, threshold, relative=relative, scorer=scorer)):
        if result.text != chunk.text:
            chunk = result.apply(chunk)
            records.append({"id": chunk.id, "original_chars": chunk.meta["prune"]["original_chars"],
                            "kept_chars": len(chunk.text), "score": chunk.meta["prune"]["score"]})
        out.append(chunk)
    return out, records


def summary_targets(chunks: Sequence[Chunk], *, skip: int, max_tokens: int, tok: Tokenizer) -> list[int]:
    """The indexes of the chunks that get a written summary (extractive or LLM): past the first
    ``skip`` (the key facts), with no summary of their own, and longer than ``max_tokens``."""
    return [i for i in range(skip, len(chunks)) if chunks[i].summary is None and tok.count(chunks[i].text) > max_tokens]


def summary_step(
    query: str, chunks: Sequence[Chunk], *, skip: int, max_tokens: int, tok: Tokenizer, scorer: str = "auto"
) -> list[Chunk]:
    """Extractive summaries for the chunks :func:`summary_targets` picks (their sentences go
    through the sentence model in one call)."""
    from .steps import extractive_summaries

    out = list(chunks)
    todo = summary_targets(chunks, skip=skip, max_tokens=max_tokens, tok=tok)
    texts = extractive_summaries(query, [chunks[i] for i in todo], max_tokens, tok, scorer=scorer) if todo else []
    for i, text in zip(todo, texts):
        if text:
            out[i] = replace(chunks[i], meta={**chunks[i].meta, "summary": text, "summary_source": "extractive"})
    return out
