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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..checks import check_int, check_number
from ..chunk import Chunk
from ..layout.base import Item
from ..tokens.tokenizers import Tokenizer

if TYPE_CHECKING:
    from .fast import FastPaths
    from .fast.skip import Skipper


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


# chunks left out together, with their reason (one for all, or one each)
Run = tuple[Sequence[Chunk], str | list[str]]


@dataclass(frozen=True)
class Fit:
    """The outcome of :func:`fit`: items to render (rank order) and chunks left out, with reasons.

    ``runs`` are chunks left out together (a slice of the ranked chunks: the budget ran out, or a
    skip-ahead passed them), with one reason for all of them or a reason each.
    """

    items: list[Item]
    dropped: list[tuple[Chunk, str]]
    used: int
    runs: list[Run] = field(default_factory=list)


@dataclass(frozen=True)
class Bounds:
    """Lower bounds that decide how a left-out chunk's reason reads, declared by the tokenizer
    (``lower_bound``: a text has at least that many tokens; see :class:`edgewise.tokens.tokenizers.Bounded`)
    and the layout (``tags_bound``: a chunk's block cut to no text costs at least that much, by its
    title; see :mod:`edgewise.layout.hooks`). A chunk whose words outnumber the tokens left is not
    encoded: its reason says it needs more."""

    text: Callable[[str, int], int] | None = None
    tags: Callable[[str | None], int] | None = None


def fit(
    ranked: Sequence[Chunk],
    available: int | None,
    *,
    cost: Callable[[Item], int],
    tokenizer: Tokenizer,
    min_truncated_tokens: int = 32,
    first_rank: int = 0,
    prefer_summary: bool = False,
    bounds: Bounds | None = None,
    fast: FastPaths | None = None,
) -> Fit:
    """Greedily fit chunks, best first, into ``available`` tokens (None: no limit).

    Each chunk goes in whole if it fits; else its ``meta.summary`` if that fits; else its text cut
    at a token boundary if at least ``min_truncated_tokens`` of it fit; else it is dropped.
    ``cost(item)`` is what an item adds to the prompt (its rendered block and separator).
    With ``prefer_summary``, a chunk that has a summary goes in as its summary first. ``fast``
    (see :mod:`edgewise.packing.fast`) skips runs of chunks that cannot go in and prices cuts
    without rendering them: the same result, sooner.
    """
    if available is None:
        return Fit([Item(chunk, "whole", chunk.text, rank) for rank, chunk in enumerate(ranked, first_rank)], [], 0)
    bounds = bounds or Bounds()
    walk = _Walk(ranked, available, cost, tokenizer, min_truncated_tokens, prefer_summary, bounds)
    walk.run(first_rank, None if fast is None else fast.skipper(ranked, min_truncated_tokens, bounds.text, bounds.tags,
                                                                walk.skipped_why))
    if prefer_summary:
        walk.give_back_whole()
    return Fit(walk.items, walk.dropped, available - walk.left, walk.runs)


class _Walk:
    """One :func:`fit`: the chunks walked in rank order, the tokens left, what went in and what not."""

    def __init__(self, ranked: Sequence[Chunk], left: int, cost: Callable[[Item], int], tokenizer: Tokenizer,
                 min_truncated_tokens: int, prefer_summary: bool, bounds: Bounds) -> None:
        self.ranked, self.left, self.cost, self.tokenizer = ranked, left, cost, tokenizer
        self.min_cut, self.prefer_summary = min_truncated_tokens, prefer_summary
        self.bound, self.tags_bound = bounds.text, bounds.tags
        self.tags_cost: Callable[[str, str | None], int] | None = None  # a fast path's exact price of a chunk's tags
        self.items: list[Item] = []
        self.dropped: list[tuple[Chunk, str]] = []
        self.runs: list[Run] = []
        # The cost of an empty block with an empty id: with fewer tokens left, nothing can fit.
        self.floor = cost(Item(Chunk("", ""), "whole", "", 0))
        # the reasons of chunks left out on their word bound, by the (left, tags bound, tags cost) they name
        self.bounded_why: dict[tuple[int, int, int | None], str] = {}

    def run(self, first_rank: int, skipper: Skipper | None) -> None:
        """Walk the chunks: each goes in or is left out; once the budget cannot hold even an empty
        block, the rest are left out together. A ``skipper`` passes over runs of chunks the walk
        would leave out one by one, with the same reasons."""
        ranked, i, n = self.ranked, 0, len(self.ranked)
        if skipper is not None:
            self.tags_cost = skipper.tags_cost
        dropped_last = False  # whether the chunk before was left out: then a run of them may follow
        while i < n:
            if self.left < self.floor:
                self.runs.append((ranked[i:], f"budget exhausted: {max(self.left, 0)} tokens left, "
                                              f"less than any chunk needs ({self.floor})"))
                return
            if dropped_last and skipper is not None and skipper.applies(self.left, self.floor):
                end, whys = skipper.run(i, self.left, self.floor)
                if end > i:
                    self.runs.append((ranked[i:end], whys))
                    i = end
                    continue
            dropped_last = not self.place(ranked[i], first_rank + i)
            i += 1

    def skipped_why(self, left: int, least: int, overhead: int | None = None) -> str:
        """The reason of a chunk left out on its word bound (one string for all that name the same)."""
        why = self.bounded_why.get((left, least, overhead))
        if why is None:
            why = self.bounded_why[left, least, overhead] = _why(None, None, False, left, self.min_cut, overhead, least)
        return why

    def place(self, chunk: Chunk, rank: int) -> bool:
        """Put the chunk in whole if it fits (see :meth:`place_short` for the rest). True if in.
        A chunk whose words alone outnumber the tokens left is not encoded: a text of at most
        2 x left characters has at most ``left`` words."""
        summary, text, left, bound = chunk.summary, chunk.text, self.left, self.bound
        if bound is not None and len(text) > 2 * left and bound(text, left) > left:
            whole, need = None, None
        else:
            whole = Item(chunk, "whole", text, rank)
            need = self.cost(whole)
            if need <= left and not (self.prefer_summary and summary is not None):
                return self.put(whole, need)
        return self.place_short(chunk, rank, summary, whole, need)

    def place_short(self, chunk: Chunk, rank: int, summary: str | None, whole: Item | None, need: int | None) -> bool:
        """Put in the chunk's summary, or the chunk whole (where the summary was preferred but does
        not fit), or the chunk cut; else drop it with its reason. True if in."""
        short, need_summary = self.summary(chunk, rank, summary)
        if short is not None and need_summary <= self.left:  # type: ignore[operator]
            return self.put(short, need_summary)  # type: ignore[arg-type]
        if whole is not None and need <= self.left:  # type: ignore[operator]
            return self.put(whole, need)  # type: ignore[arg-type]
        overhead, least = self.tags_overhead(chunk, rank)
        if overhead is not None and self.put_cut(chunk, rank, overhead):
            return True
        if need is None and summary is None and overhead is None:
            # skipped on its bound: the same reason as others skipped with as much left
            self.dropped.append((chunk, self.skipped_why(self.left, least)))
        else:
            self.dropped.append((chunk, _why(need, need_summary, summary is not None, self.left, self.min_cut,
                                             overhead, least)))
        return False

    def put(self, item: Item, need: int) -> bool:
        self.items.append(item)
        self.left -= need
        return True

    def summary(self, chunk: Chunk, rank: int, summary: str | None) -> tuple[Item | None, int | None]:
        """The chunk as its summary and its cost; (None, None) without one, or where its words alone
        outnumber the tokens left."""
        left = self.left
        if summary is None or (self.bound is not None and len(summary) > 2 * left and self.bound(summary, left) > left):
            return None, None
        short = Item(chunk, "summary", summary, rank)
        return short, self.cost(short)

    def tags_overhead(self, chunk: Chunk, rank: int) -> tuple[int | None, int]:
        """What the chunk's block costs with no text (None where a bound shows that too little
        room is left for a cut, so it is not priced), and the least it can cost."""
        overhead, least, floor = None, self.floor, self.floor
        if self.left - floor >= self.min_cut:
            least = floor if self.tags_bound is None else self.tags_bound(chunk.title)
            if self.left - least >= self.min_cut:
                overhead = (self.tags_cost(chunk.id, chunk.title) if self.tags_cost is not None
                            else self.cost(Item(chunk, "truncated", "", rank)))
        return overhead, least

    def put_cut(self, chunk: Chunk, rank: int, overhead: int) -> bool:
        """Put the chunk in cut at a token boundary, if at least ``min_cut`` of its tokens fit."""
        left, room, tokenizer, cost = self.left, self.left - overhead, self.tokenizer, self.cost
        if room < self.min_cut:
            return False
        cut = Item(chunk, "truncated", tokenizer.truncate(chunk.text, room), rank)
        need_cut = cost(cut)
        while need_cut > left and cut.text:  # merges at the block's edges can add a token
            cut = Item(chunk, "truncated", tokenizer.truncate(cut.text, tokenizer.count(cut.text) - (need_cut - left)), rank)
            need_cut = cost(cut)
        if cut.text and need_cut <= left and tokenizer.count(cut.text) >= self.min_cut:
            return self.put(cut, need_cut)
        return False

    def give_back_whole(self) -> None:
        """Room left over: give summarised chunks their whole text back, best first."""
        items, cost = self.items, self.cost
        for k, item in enumerate(items):
            if item.form == "summary":
                extra = cost(Item(item.chunk, "whole", item.chunk.text, item.rank)) - cost(item)
                if extra <= self.left:
                    items[k] = Item(item.chunk, "whole", item.chunk.text, item.rank)
                    self.left -= extra


def _why(need: int | None, need_summary: int | None, has_summary: bool, left: int, min_truncated_tokens: int,
         overhead: int | None, least: int) -> str:
    """Why a chunk was dropped: what it needed whole (and as its summary), what was left."""
    why = f"does not fit: needs {_tokens(need, left)} whole"
    if has_summary:
        why += f", {need_summary if need_summary is not None else f'more than {left}'} as its summary"
    return (f"{why}, {left} left: too few to truncate it to "
            f"{min_truncated_tokens} tokens plus {overhead if overhead is not None else f'at least {least}'} for its tags")


def _tokens(need: int | None, left: int) -> str:
    """A drop reason's cost: exact, or (never encoded) more than what was left, by its word count."""
    return f"{need} tokens" if need is not None else f"more than {left} tokens (it has more words)"
