"""Skip-ahead: a run of chunks that cannot go in, left out together without building or encoding them.

:func:`edgewise.packing.select.fit` walks the ranked chunks one by one. Once one is left out, the
next thousands are often left out for the same reason: their words alone outnumber the tokens
left (the tokenizer's ``lower_bound``), they have no summary, and no cut of them fits (too little
room, or their tags, bounded by the layout's ``tags_bound``, leave too little). :class:`Skipper`
finds where such a run ends and gives each chunk of it the reason the walk would have given it,
reading only texts, titles and ids (a lazy sequence's columns; a block of them at a time by the
bound's own ``scan``, in C where built). ``tests/packing/test_plain_and_fast.py`` holds the result to
the walk's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ...chunk import Chunk
from .lazy import columns, id_at, scan

#: why a chunk skipped on its bound is left out: (tokens left, least its tags cost, their exact cost or None) -> reason
Why = Callable[[int, int, "int | None"], str]


class Skipper:
    """The runs one :func:`~edgewise.packing.select.fit` walk can skip (see the module)."""

    def __init__(self, ranked: Sequence[Chunk], min_cut: int, bound: Callable[[str, int], int],
                 tags_bound: Callable[[str | None], int] | None,
                 tags_cost: Callable[[str, str | None], int] | None, why: Why) -> None:
        self.ranked, self.min_cut, self.bound, self.why = ranked, min_cut, bound, why
        self.tags_bound, self.tags_cost = tags_bound, tags_cost
        lazy = getattr(bound, "scan", None) is not None and columns(ranked) is not None
        self.over = self.texts_over if lazy else None
        # (end, left, final, block): the texts of the ranks before `end` have more words than `left`
        # (or any fewer tokens); `final`: and the text at `end` does not (or `end` is the last rank);
        # `block`: how many ranks that scan read
        self._over = (0, -1, False, 0)
        self.left = 0

    def applies(self, left: int, floor: int) -> bool:
        """Whether a run can start with ``left`` tokens left: no cut fits, or titles can show it."""
        return left - floor < self.min_cut or self.tags_bound is not None

    def run(self, i: int, left: int, floor: int) -> tuple[int, str | list[str]]:
        """The end of the run of chunks from ``i`` that cannot go in ``left`` tokens, and its reason
        (one for all, or one each); ``i`` itself where none can be skipped."""
        self.left = left
        if left - floor < self.min_cut:
            return skip_unfit(self.ranked, i, left, self.bound, self.over), self.why(left, floor, None)
        return skip_uncut(self.ranked, i, left, self.bound, self.tags_bound, self.tags_cost,  # type: ignore[arg-type]
                          self.min_cut, self.why, self.over)

    def texts_over(self, i: int) -> tuple[int, bool]:
        """For a lazy sequence, the end of the ranks from ``i`` whose texts have more words than the
        tokens left, and whether that end is final (its text has not, or it is the last rank) or only
        where this scan stopped: scanned in blocks that double while a run goes on, remembered while
        the tokens left only fall."""
        end, at_left, final, block = self._over
        if i < end and self.left <= at_left:
            return end, final and self.left == at_left
        texts, _titles, _ids, order = columns(self.ranked)  # type: ignore[misc] - a lazy sequence
        block = 2 * block if i == end else 64
        part = order[i:i + block]
        found = int(self.bound.scan(texts, part, 0, self.left, 2 * self.left))  # type: ignore[attr-defined]
        end, final = i + found, found < len(part) or i + block >= len(order)
        self._over = end, self.left, final, block
        return end, final


def skip_unfit(ranked: Sequence[Chunk], start: int, left: int, bound: Callable[[str, int], int],
               over: Callable[[int], tuple[int, bool]] | None = None) -> int:
    """From ``start``, the chunks that cannot go in ``left`` tokens where no chunk can be cut: no
    summary and more words than ``left``. Returns the index of the first chunk that might go in
    (``len(ranked)`` if none). Reads texts only, so a lazy sequence builds no chunk it skips.
    ``over(i)``, if given, is where the texts from ``i`` stop having more words than ``left``, and
    whether that is final or only where its scan stopped (a lazy sequence's chunks have no summary).
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
               min_truncated_tokens: int, why: Why,
               over: Callable[[int], tuple[int, bool]] | None = None) -> tuple[int, list[str]]:
    """From ``start``, the chunks that cannot go in ``left`` tokens, where a chunk with short enough
    tags could be cut: no summary, more words than ``left``, and tags that leave fewer than
    ``min_truncated_tokens`` (by ``tags_bound`` of the title, else by ``tags_cost`` exactly).
    Returns the index of the first chunk that might go in and each skipped chunk's reason. Reads
    texts, titles and ids only; with ``over`` (as for :func:`skip_unfit`), only the titles and ids
    of the ranks before it.
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
                 tags_cost: Callable[[str, str | None], int] | None, min_cut: int, why: Why) -> None:
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
