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
    if top_k is None and min_score is None and word_count_threshold is None:
        return list(ranked), []
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
    bound: Callable[[str, int], int] | None = None,
    tags_bound: Callable[[Chunk], int] | None = None,
) -> Fit:
    """Greedily fit chunks, best first, into ``available`` tokens (None: no limit).

    Each chunk goes in whole if it fits; else its ``meta.summary`` if that fits; else its text cut
    at a token boundary if at least ``min_truncated_tokens`` of it fit; else it is dropped.
    ``cost(item)`` is what an item adds to the prompt (its rendered block and separator).
    With ``prefer_summary``, a chunk that has a summary goes in as its summary first.

    ``bound(text, stop)``, if given, is a provable lower bound on the cost of any item holding
    ``text`` (it may stop counting past ``stop``): a chunk (or summary) whose bound already exceeds
    the tokens left is known not to fit without rendering or encoding it, so a budget that fills
    early costs what the placed chunks cost, not a pass over every chunk. ``tags_bound(chunk)``, if
    given, bounds the cost of the chunk's block truncated to no text the same way.
    """
    items: list[Item] = []
    dropped: list[tuple[Chunk, str]] = []
    left = available
    if left is None:
        return Fit([Item(chunk, "whole", chunk.text, rank) for rank, chunk in enumerate(ranked, first_rank)], [], 0)
    # The cost of an empty block with an empty id: with fewer tokens left, nothing can fit.
    floor = cost(Item(Chunk("", ""), "whole", "", 0))
    exhausted = ""  # the reason, shared by every chunk dropped while `left` stays the same
    # the reasons of chunks skipped on their word bound alone, by the (left, tags bound) they name
    bounded_why: dict[tuple[int, int], str] = {}
    for rank, chunk in enumerate(ranked, first_rank):
        if left < floor:
            if not exhausted:
                exhausted = f"budget exhausted: {max(left, 0)} tokens left, less than any chunk needs ({floor})"
            dropped.append((chunk, exhausted))
            continue
        summary = chunk.summary
        # a chunk whose words alone outnumber the tokens left cannot go in whole: don't encode it
        # (a text of at most 2 x left characters has at most `left` words: no need to count them)
        text = chunk.text
        whole = None
        if bound is not None and len(text) > 2 * left and bound(text, left) > left:
            need = None
        else:
            whole = Item(chunk, "whole", text, rank)
            need = cost(whole)
        if need is not None and need <= left and not (prefer_summary and summary is not None):
            items.append(whole)  # type: ignore[arg-type] - set whenever need is
            left -= need
            exhausted = ""
            continue
        need_summary = None
        if summary is not None and (bound is None or len(summary) <= 2 * left or bound(summary, left) <= left):
            short = Item(chunk, "summary", summary, rank)
            need_summary = cost(short)
            if need_summary <= left:
                items.append(short)
                left -= need_summary
                exhausted = ""
                continue
        if need is not None and need <= left:  # preferred the summary, but only the whole chunk fits (a long summary)
            items.append(whole)  # type: ignore[arg-type]
            left -= need
            exhausted = ""
            continue
        # An empty block costs at least `floor` (and its tags at least `tags_bound`): don't price a
        # cut that cannot leave enough text.
        overhead, least = None, floor
        if left - floor >= min_truncated_tokens:
            least = floor if tags_bound is None else tags_bound(chunk)
            if left - least >= min_truncated_tokens:
                overhead = cost(Item(chunk, "truncated", "", rank))
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
                exhausted = ""
                continue
        if need is None and summary is None and overhead is None and (known := bounded_why.get((left, least))):
            dropped.append((chunk, known))  # skipped on its bound, as others were with as much left: same reason
            continue
        why = f"does not fit: needs {_tokens(need, left)} whole"
        if summary is not None:
            why += f", {need_summary if need_summary is not None else f'more than {left}'} as its summary"
        why = (f"{why}, {left} left: too few to truncate it to "
               f"{min_truncated_tokens} tokens plus {overhead if overhead is not None else f'at least {least}'} for its tags")
        if need is None and summary is None and overhead is None:
            bounded_why[left, least] = why
        dropped.append((chunk, why))
    if prefer_summary:
        # room left over: give summarised chunks their whole text back, best first
        for i, item in enumerate(items):
            if item.form == "summary":
                extra = cost(Item(item.chunk, "whole", item.chunk.text, item.rank)) - cost(item)
                if extra <= left:
                    items[i] = Item(item.chunk, "whole", item.chunk.text, item.rank)
                    left -= extra
    return Fit(items, dropped, available - left)


def _tokens(need: int | None, left: int) -> str:
    """A drop reason's cost: exact, or (never encoded) more than what was left, by its word count."""
    return f"{need} tokens" if need is not None else f"more than {left} tokens (it has more words)"
