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

from .checks import check_int, check_number
from .chunk import Chunk
from .layout.base import Item
from .ranked import columns, id_at, scan
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
    items: list[Item] = []
    dropped: list[tuple[Chunk, str]] = []
    runs: list[Run] = []
    left = available
    if left is None:
        return Fit([Item(chunk, "whole", chunk.text, rank) for rank, chunk in enumerate(ranked, first_rank)], [], 0)
    # The cost of an empty block with an empty id: with fewer tokens left, nothing can fit.
    floor = cost(Item(Chunk("", ""), "whole", "", 0))
    # the reasons of chunks skipped on their word bound, by the (left, tags bound, tags cost) they name
    bounded_why: dict[tuple[int, int, int | None], str] = {}

    def skipped_why(left: int, least: int, overhead: int | None = None) -> str:
        why = bounded_why.get((left, least, overhead))
        if why is None:
            why = bounded_why[left, least, overhead] = _why(None, None, False, left, min_truncated_tokens, overhead, least)
        return why

    i, n = 0, len(ranked)
    dropped_last = False  # whether the chunk before was left out: then look for a run of them
    while i < n:
        if left < floor:  # and so for every later chunk: one run, not a walk
            runs.append((ranked[i:], f"budget exhausted: {max(left, 0)} tokens left, less than any chunk needs ({floor})"))
            break
        if bound is not None and dropped_last and (left - floor < min_truncated_tokens or tags_bound is not None):
            # skip, without building them, the chunks that cannot go in: no summary, more words than
            # `left`, and too little room to cut them (their empty block costs at least `floor`, their
            # tags at least `tags_bound`, or exactly `tags_cost`); one run, with one reason or one each
            whys: str | list[str]
            if left - floor < min_truncated_tokens:
                end, whys = skip_unfit(ranked, i, left, bound), skipped_why(left, floor)
            else:
                end, whys = skip_uncut(ranked, i, left, bound, tags_bound, tags_cost, min_truncated_tokens,  # type: ignore[arg-type]
                                       skipped_why)
            if end > i:
                runs.append((ranked[i:end], whys))
                i = end
                continue
        chunk = ranked[i]
        rank = first_rank + i
        i += 1
        dropped_last = False
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
            continue
        need_summary = None
        if summary is not None and (bound is None or len(summary) <= 2 * left or bound(summary, left) <= left):
            short = Item(chunk, "summary", summary, rank)
            need_summary = cost(short)
            if need_summary <= left:
                items.append(short)
                left -= need_summary
                continue
        if need is not None and need <= left:  # preferred the summary, but only the whole chunk fits (a long summary)
            items.append(whole)  # type: ignore[arg-type]
            left -= need
            continue
        # An empty block costs at least `floor` (and its tags at least `tags_bound`): don't price a
        # cut that cannot leave enough text.
        overhead, least = None, floor
        if left - floor >= min_truncated_tokens:
            least = floor if tags_bound is None else tags_bound(chunk.title)
            if left - least >= min_truncated_tokens:
                overhead = tags_cost(chunk.id, chunk.title) if tags_cost is not None else cost(Item(chunk, "truncated", "", rank))
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
        if need is None and summary is None and overhead is None:
            # skipped on its bound: the same reason as others skipped with as much left
            dropped.append((chunk, skipped_why(left, least)))
            dropped_last = True
            continue
        dropped.append((chunk, _why(need, need_summary, summary is not None, left, min_truncated_tokens, overhead, least)))
        dropped_last = True
    if prefer_summary:
        # room left over: give summarised chunks their whole text back, best first
        for k, item in enumerate(items):
            if item.form == "summary":
                extra = cost(Item(item.chunk, "whole", item.chunk.text, item.rank)) - cost(item)
                if extra <= left:
                    items[k] = Item(item.chunk, "whole", item.chunk.text, item.rank)
                    left -= extra
    return Fit(items, dropped, available - left, runs)


def skip_unfit(ranked: Sequence[Chunk], start: int, left: int, bound: Callable[[str, int], int]) -> int:
    """From ``start``, the chunks that cannot go in ``left`` tokens where no chunk can be cut (see
    :func:`fit`): no summary and more words than ``left``. Returns the index of the first chunk that
    might go in (``len(ranked)`` if none). Reads texts only, so a lazy sequence builds no chunk it skips.
    """
    i, limit = start, 2 * left
    many, cols = getattr(bound, "scan", None), columns(ranked)
    if many is not None and cols is not None:  # the bound's own scan of a lazy sequence's texts (C)
        texts, _titles, _ids, order = cols
        return int(many(texts, order, start, left, limit))
    for text, _title, has_summary in scan(ranked, start):
        if has_summary or len(text) <= limit or bound(text, left) <= left:
            break
        i += 1
    return i


def skip_uncut(ranked: Sequence[Chunk], start: int, left: int, bound: Callable[[str, int], int],
               tags_bound: Callable[[str | None], int], tags_cost: Callable[[str, str | None], int] | None,
               min_truncated_tokens: int, why: Callable[[int, int, int | None], str]) -> tuple[int, list[str]]:
    """From ``start``, the chunks that cannot go in ``left`` tokens, where a chunk with short enough
    tags could be cut: no summary, more words than ``left``, and tags that leave fewer than
    ``min_truncated_tokens`` (by ``tags_bound`` of the title, else by ``tags_cost`` exactly).
    Returns the index of the first chunk that might go in and each skipped chunk's reason,
    ``why(left, tags bound, exact tags cost or None)``. Reads texts, titles and ids only.
    """
    i, limit = start, 2 * left
    whys: list[str] = []
    by_title: dict[str | None, str | None] = {}  # a title's reason, or None where it leaves room for a cut
    by_cost: dict[int, str] = {}  # the reason of a chunk whose tags cost that much

    def reason(title: str | None, chunk_id: Callable[[], str]) -> str | None:
        """Why a chunk with this title and more words than ``left`` cannot be cut; None if it might be."""
        found = by_title.get(title, "")
        if found == "":
            least = tags_bound(title)
            found = by_title[title] = why(left, least, None) if left - least < min_truncated_tokens else None
        if found is None:
            if tags_cost is None or left - (overhead := tags_cost(chunk_id(), title)) >= min_truncated_tokens:
                return None
            found = by_cost.get(overhead)
            if found is None:  # (a reason that names the tags' cost does not name their bound)
                found = by_cost[overhead] = why(left, 0, overhead)
        return found

    many, cols = getattr(bound, "scan", None), columns(ranked)
    if many is not None and cols is not None:
        # the bound's own scan (C) skips the chunks whose text is over and whose title (or tags'
        # price) already has a reason; it stops (~i) at one that needs deciding here, or (i) where
        # a text might fit
        texts, titles, ids, order = cols
        room = left - min_truncated_tokens  # tags that cost more leave too little room for a cut
        while (i := many(texts, order, i, left, limit, titles, by_title, whys, ids, tags_cost, room, by_cost)) < 0:
            at = order[~i]
            if (found := reason(titles[at], ids[at].__str__)) is None:
                return ~i, whys
            whys.append(found)
            i = ~i + 1
        return i, whys
    for text, title, has_summary in scan(ranked, start):
        if has_summary or len(text) <= limit or bound(text, left) <= left or (
                found := reason(title, partial(id_at, ranked, i))) is None:
            break
        whys.append(found)
        i += 1
    return i, whys


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
