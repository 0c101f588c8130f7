"""Selection: which ranked chunks go in, and in which form, under the limits and the budget.

Two small steps. :func:`limit` applies ``min_score``, ``top_k`` and Haystack's
``word_count_threshold``; :func:`fit` walks the survivors in rank order and puts each one in whole,
as its summary, truncated at a token boundary, or not at all, against the tokens left.

>>> from edgewise.chunk import Chunk
>>> ranked = [Chunk(str(i), f"word{i}") for i in range(1, 10)]
>>> kept, dropped = limit(ranked, word_count_threshold=6)
>>> [c.id for c in kept], dropped[0][1]
(['1', '2', '3', '4', '5', '6'], 'word_count_threshold=6 reached by the chunk ranked 6')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .checks import check_int, check_number
from .chunk import Chunk
from .layout.base import Item
from .tokens import Tokenizer


def limit(
    ranked: Sequence[Chunk],
    *,
    top_k: int | None = None,
    min_score: float | None = None,
    word_count_threshold: float | None = None,
) -> tuple[list[Chunk], list[tuple[Chunk, str]]]:
    """Apply the count limits to chunks given best first; return (kept, [(dropped, reason)]).

    ``word_count_threshold`` has Haystack's semantics: chunks are added in rank order, the one
    whose words bring the total to the threshold is kept, and every later one is dropped.
    """
    check_int("top_k", top_k, minimum=1, optional=True)
    check_number("word_count_threshold", word_count_threshold, above=0, optional=True, what="a number > 0")
    kept: list[Chunk] = []
    dropped: list[tuple[Chunk, str]] = []
    words = 0
    reached_at: int | None = None
    for rank, chunk in enumerate(ranked, 1):
        if min_score is not None and (chunk.score is None or chunk.score < min_score):
            dropped.append((chunk, f"score {chunk.score} is below min_score={min_score}"))
        elif top_k is not None and len(kept) >= top_k:
            dropped.append((chunk, f"beyond top_k={top_k} (rank {rank})"))
        elif reached_at is not None:
            dropped.append((chunk, f"word_count_threshold={word_count_threshold} reached by the chunk ranked {reached_at}"))
        else:
            kept.append(chunk)
            if word_count_threshold is not None and chunk.text:
                words += len(chunk.text.split())
                if words >= word_count_threshold:
                    reached_at = rank
    return kept, dropped


@dataclass(frozen=True)
class Fit:
    """The outcome of :func:`fit`: items to render (rank order) and chunks left out, with reasons."""

    items: list[Item]
    dropped: list[tuple[Chunk, str]]
    used: int


def fit(
    ranked: Sequence[Chunk],
    available: int | None,
    *,
    cost: Callable[[Item], int],
    tokenizer: Tokenizer,
    min_truncated_tokens: int = 32,
    first_rank: int = 0,
    prefer_summary: bool = False,
) -> Fit:
    """Greedily fit chunks, best first, into ``available`` tokens (None: no limit).

    Each chunk goes in whole if it fits; else its ``meta.summary`` if that fits; else its text cut
    at a token boundary if at least ``min_truncated_tokens`` of it fit; else it is dropped.
    ``cost(item)`` is what an item adds to the prompt (its rendered block and separator).
    With ``prefer_summary``, a chunk that has a summary goes in as its summary first.
    """
    items: list[Item] = []
    dropped: list[tuple[Chunk, str]] = []
    left = available
    # The cost of an empty block with an empty id: with fewer tokens left, nothing can fit.
    floor = cost(Item(Chunk("", ""), "whole", "", 0)) if available is not None else 0
    for rank, chunk in enumerate(ranked, first_rank):
        whole = Item(chunk, "whole", chunk.text, rank)
        if left is None:
            items.append(whole)
            continue
        if left < floor:
            dropped.append((chunk, f"budget exhausted: {max(left, 0)} tokens left, less than any chunk needs ({floor})"))
            continue
        summary = chunk.summary
        need = cost(whole)
        if need <= left and not (prefer_summary and summary is not None):
            items.append(whole)
            left -= need
            continue
        if summary is not None:
            short = Item(chunk, "summary", summary, rank)
            need_summary = cost(short)
            if need_summary <= left:
                items.append(short)
                left -= need_summary
                continue
            if need <= left:  # preferred the summary, but only the whole chunk fits (a long summary)
                items.append(whole)
                left -= need
                continue
        # An empty block costs at least `floor`: don't price a cut that cannot leave enough text.
        overhead = cost(Item(chunk, "truncated", "", rank)) if left - floor >= min_truncated_tokens else None
        room = -1 if overhead is None else left - overhead
        if room >= min_truncated_tokens:
            cut = Item(chunk, "truncated", tokenizer.truncate(chunk.text, room), rank)
            need_cut = cost(cut)
            while need_cut > left and cut.text:  # merges at the block's edges can add a token
                cut = Item(chunk, "truncated", tokenizer.truncate(cut.text, tokenizer.count(cut.text) - (need_cut - left)), rank)
                need_cut = cost(cut)
            if cut.text and need_cut <= left and tokenizer.count(cut.text) >= min_truncated_tokens:
                items.append(cut)
                left -= need_cut
                continue
        why = f"does not fit: needs {need} tokens whole"
        if summary is not None:
            why += f", {need_summary} as its summary"
        dropped.append((chunk, f"{why}, {left} left: too few to truncate it to "
                               f"{min_truncated_tokens} tokens plus {overhead if overhead is not None else f'at least {floor}'} for its tags"))
    if prefer_summary and left is not None:
        # room left over: give summarised chunks their whole text back, best first
        for i, item in enumerate(items):
            if item.form == "summary":
                extra = cost(Item(item.chunk, "whole", item.chunk.text, item.rank)) - cost(item)
                if extra <= left:
                    items[i] = Item(item.chunk, "whole", item.chunk.text, item.rank)
                    left -= extra
    return Fit(items, dropped, 0 if available is None or left is None else available - left)
