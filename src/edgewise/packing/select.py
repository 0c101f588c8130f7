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
from functools import partial
from typing import Any

from ..checks import check_int, check_number
from ..chunk import Chunk
from ..layout.base import Item
from ..tokens.tokenizers import Tokenizer
from .plain import columns, id_at, scan


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

    ``runs`` are chunks left out together (a slice of the ranked chunks, never walked one by one:
    the budget ran out, or their words outnumber the tokens left), with one reason for all of them
    or a reason each.
    """

    items: list[Item]
    dropped: list[tuple[Chunk, str]]
    used: int
    runs: list[Run] = field(default_factory=list)


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
    tags_bound: Callable[[str | None], int] | None = None,
    tags_cost: Callable[[str, str | None], int] | None = None,
) -> Fit:
    """Greedily fit chunks, best first, into ``available`` tokens (None: no limit).

    Each chunk goes in whole if it fits; else its ``meta.summary`` if that fits; else its text cut
    at a token boundary if at least ``min_truncated_tokens`` of it fit; else it is dropped.
    ``cost(item)`` is what an item adds to the prompt (its rendered block and separator).
    With ``prefer_summary``, a chunk that has a summary goes in as its summary first.

    ``bound(text, stop)``, if given, is a provable lower bound on the cost of any item holding
    ``text`` (it may stop counting past ``stop``): a chunk (or summary) whose bound already exceeds
    the tokens left is known not to fit without rendering or encoding it, so a budget that fills
    early costs what the placed chunks cost, not a pass over every chunk. ``tags_bound(title)``, if
    given, bounds the cost of a chunk's block truncated to no text the same way, by its title;
    ``tags_cost(id, title)``, if given, is that cost exactly (else the block is rendered and counted).
    """
    if available is None:
        return Fit([Item(chunk, "whole", chunk.text, rank) for rank, chunk in enumerate(ranked, first_rank)], [], 0)
    walk = _Walk(ranked, available, cost, tokenizer, min_truncated_tokens, prefer_summary, bound, tags_bound, tags_cost)
    walk.run(first_rank)
    if prefer_summary:
        walk.give_back_whole()
    return Fit(walk.items, walk.dropped, available - walk.left, walk.runs)


class _Walk:
    """One :func:`fit`: the chunks walked in rank order, the tokens left, what went in and what not."""

    def __init__(self, ranked: Sequence[Chunk], left: int, cost: Callable[[Item], int], tokenizer: Tokenizer,
                 min_truncated_tokens: int, prefer_summary: bool, bound: Callable[[str, int], int] | None,
                 tags_bound: Callable[[str | None], int] | None,
                 tags_cost: Callable[[str, str | None], int] | None) -> None:
        self.ranked, self.left, self.cost, self.tokenizer = ranked, left, cost, tokenizer
        self.min_cut, self.prefer_summary = min_truncated_tokens, prefer_summary
        self.bound, self.tags_bound, self.tags_cost = bound, tags_bound, tags_cost
        self.items: list[Item] = []
        self.dropped: list[tuple[Chunk, str]] = []
        self.runs: list[Run] = []
        # The cost of an empty block with an empty id: with fewer tokens left, nothing can fit.
        self.floor = cost(Item(Chunk("", ""), "whole", "", 0))
        # the reasons of chunks skipped on their word bound, by the (left, tags bound, tags cost) they name
        self.bounded_why: dict[tuple[int, int, int | None], str] = {}
        # (end, left, final, block): the texts of the ranks before `end` have more words than `left`
        # (or any fewer tokens); `final`: and the text at `end` does not (or `end` is the last rank);
        # `block`: how many ranks that scan read
        self.over = (0, -1, False, 0)

    def run(self, first_rank: int) -> None:
        """Walk the chunks: each goes in, is left out, or starts a run of chunks left out together."""
        ranked, i, n = self.ranked, 0, len(self.ranked)
        dropped_last = False  # whether the chunk before was left out: then look for a run of them
        while i < n:
            if self.left < self.floor:  # and so for every later chunk: one run, not a walk
                self.runs.append((ranked[i:], f"budget exhausted: {max(self.left, 0)} tokens left, "
                                              f"less than any chunk needs ({self.floor})"))
                return
            if dropped_last and self.bound is not None and (
                    self.left - self.floor < self.min_cut or self.tags_bound is not None):
                end = self.skip_run(i)
                if end > i:
                    i = end
                    continue
            dropped_last = not self.place(ranked[i], first_rank + i)
            i += 1

    def skip_run(self, i: int) -> int:
        """Skip, without building them, the chunks from ``i`` that cannot go in: no summary, more
        words than ``left``, and too little room to cut them (their empty block costs at least
        ``floor``, their tags at least ``tags_bound``, or exactly ``tags_cost``); one run, with one
        reason or one each. Returns the rank after the run."""
        whys: str | list[str]
        bound = self.bound
        over = self.texts_over if getattr(bound, "scan", None) is not None and columns(self.ranked) is not None else None
        if self.left - self.floor < self.min_cut:
            end, whys = skip_unfit(self.ranked, i, self.left, bound, over), self.skipped_why(self.left, self.floor)  # type: ignore[arg-type]
        else:
            end, whys = skip_uncut(self.ranked, i, self.left, bound, self.tags_bound, self.tags_cost,  # type: ignore[arg-type]
                                   self.min_cut, self.skipped_why, over)
        if end > i:
            self.runs.append((self.ranked[i:end], whys))
        return end

    def texts_over(self, i: int) -> tuple[int, bool]:
        """For a lazy sequence, the end of the ranks from ``i`` whose texts have more words than the
        tokens left, and whether that end is final (its text has not, or it is the last rank) or only
        where this scan stopped: scanned in blocks that double while a run goes on (by the bound's
        own scan, C where built), remembered while ``left`` only falls."""
        end, at_left, final, block = self.over
        if i < end and self.left <= at_left:
            return end, final and self.left == at_left
        texts, _titles, _ids, order = columns(self.ranked)  # type: ignore[misc] - a lazy sequence
        block = 2 * block if i == end else 64
        part = order[i:i + block]
        found = int(self.bound.scan(texts, part, 0, self.left, 2 * self.left))  # type: ignore[union-attr]
        end, final = i + found, found < len(part) or i + block >= len(order)
        self.over = end, self.left, final, block
        return end, final

    def skipped_why(self, left: int, least: int, overhead: int | None = None) -> str:
        """The reason of a chunk skipped on its word bound (one string for all that name the same)."""
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


def skip_unfit(ranked: Sequence[Chunk], start: int, left: int, bound: Callable[[str, int], int],
               over: Callable[[int], tuple[int, bool]] | None = None) -> int:
    """From ``start``, the chunks that cannot go in ``left`` tokens where no chunk can be cut (see
    :func:`fit`): no summary and more words than ``left``. Returns the index of the first chunk that
    might go in (``len(ranked)`` if none). Reads texts only, so a lazy sequence builds no chunk it
    skips. ``over(i)``, if given, is where the texts from ``i`` stop having more words than
    ``left``, and whether that is final or only where its scan stopped (a lazy sequence's scan:
    its chunks have no summary).
    """
    if over is not None:
        end, final = over(start)
        while not final:
            end, final = over(end)
        return end
    i, limit = start, 2 * left
    for text, _title, has_summary in scan(ranked, start):
        if has_summary or len(text) <= limit or bound(text, left) <= left:
            break
        i += 1
    return i


def skip_uncut(ranked: Sequence[Chunk], start: int, left: int, bound: Callable[[str, int], int],
               tags_bound: Callable[[str | None], int], tags_cost: Callable[[str, str | None], int] | None,
               min_truncated_tokens: int, why: Callable[[int, int, int | None], str],
               over: Callable[[int], tuple[int, bool]] | None = None) -> tuple[int, list[str]]:
    """From ``start``, the chunks that cannot go in ``left`` tokens, where a chunk with short enough
    tags could be cut: no summary, more words than ``left``, and tags that leave fewer than
    ``min_truncated_tokens`` (by ``tags_bound`` of the title, else by ``tags_cost`` exactly).
    Returns the index of the first chunk that might go in and each skipped chunk's reason,
    ``why(left, tags bound, exact tags cost or None)``. Reads texts, titles and ids only. ``over``,
    as for :func:`skip_unfit`: then only the titles and ids of the ranks before it are read.
    """
    whys: list[str] = []
    reason = _UncutReasons(left, tags_bound, tags_cost, min_truncated_tokens, why)
    cols = columns(ranked) if over is not None else None
    if cols is not None:
        _texts, titles, ids, order = cols
        pos, final = start, False
        while not final:
            end, final = over(pos)  # type: ignore[misc] - given with cols
            stop = _known_reasons(titles, ids, order, pos, end, reason, whys)
            if stop < end:
                return stop, whys
            pos = end
        return pos, whys
    i, limit = start, 2 * left
    for text, title, has_summary in scan(ranked, start):
        if has_summary or len(text) <= limit or bound(text, left) <= left or (
                found := reason(title, partial(id_at, ranked, i))) is None:
            break
        whys.append(found)
        i += 1
    return i, whys


def _known_reasons(titles: list[Any], ids: list[str], order: list[int], start: int, end: int,
                   reason: _UncutReasons, whys: list[str]) -> int:
    """Append to ``whys`` the reasons of the ranks from ``start`` to ``end`` (whose texts are over)
    up to the first that might be cut, and return its rank (``end`` if none). A title whose reason
    is known is looked up for a whole block at once; the others are decided one by one."""
    found = list(map(reason.by_title.get, map(titles.__getitem__, order[start:end])))
    k, n = 0, len(found)
    while k < n:
        try:
            gap = found.index(None, k)
        except ValueError:
            gap = n
        whys.extend(found[k:gap])
        if gap == n:
            break
        at = order[start + gap]
        title = titles[at]
        if reason.by_title.get(title, "") is None and reason.tags_cost is not None:  # room by its bound: price it
            why = reason.priced(reason.tags_cost(ids[at], title))
        else:
            why = reason(title, ids[at].__str__)
        if why is None:
            return start + gap
        whys.append(why)
        k = gap + 1
    return end


class _UncutReasons:
    """Why a chunk with this title and more words than ``left`` cannot be cut; None if it might be
    (its tags leave room: by ``tags_bound`` of its title, then by ``tags_cost`` of its id)."""

    __slots__ = ("left", "tags_bound", "tags_cost", "min_cut", "why", "by_title", "by_cost")

    def __init__(self, left: int, tags_bound: Callable[[str | None], int],
                 tags_cost: Callable[[str, str | None], int] | None, min_cut: int,
                 why: Callable[[int, int, int | None], str]) -> None:
        self.left, self.tags_bound, self.tags_cost, self.min_cut, self.why = left, tags_bound, tags_cost, min_cut, why
        self.by_title: dict[str | None, str | None] = {}  # a title's reason, or None where it leaves room for a cut
        self.by_cost: dict[int, str] = {}  # the reason of a chunk whose tags cost that much

    def __call__(self, title: str | None, chunk_id: Callable[[], str]) -> str | None:
        found = self.by_title.get(title, "")
        if found == "":
            least = self.tags_bound(title)
            found = self.by_title[title] = self.why(self.left, least, None) if self.left - least < self.min_cut else None
        if found is None:
            return None if self.tags_cost is None else self.priced(self.tags_cost(chunk_id(), title))
        return found

    def priced(self, overhead: int) -> str | None:
        """Why a chunk whose tags cost ``overhead`` cannot be cut; None if it might be."""
        if self.left - overhead >= self.min_cut:
            return None
        found = self.by_cost.get(overhead)
        if found is None:  # (a reason that names the tags' cost does not name their bound)
            found = self.by_cost[overhead] = self.why(self.left, 0, overhead)
        return found


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
