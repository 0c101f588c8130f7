"""Plain input chunks validated and ranked without building a record for each.

A pack of 20,000 retrieved dicts of which 20 fit should pay for reading 20,000 dicts, not for
building 20,000 :class:`~edgewise.chunk.Chunk` records it will only report as dropped.
:func:`rank_plain` validates the caller's dicts with the checks :func:`edgewise.chunk.normalize`
applies to plain ones and ranks them as :func:`edgewise.score.rank.rank` ranks given scores;
:class:`PlainRanked` is the ranked sequence, building a chunk when a step reads it (the same chunk
``normalize`` builds). Anything else (a duplicate id, a Chunk, meta, an int score, a bad value) is
left to the general path, which validates it field by field and reports what is wrong.

>>> ranked, input_index, by = rank_plain([{"id": "a", "text": "x", "score": 0.1},
...                                       {"id": "b", "text": "y", "score": 0.5}])
>>> [c.id for c in ranked], input_index, by, ranked[1:].ids()
(['b', 'a'], {'a': 0, 'b': 1}, 'given', ['a'])
>>> rank_plain([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]) is None  # merged by the general path
True
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

from .chunk import Chunk, PlainFields, plain_chunk, plain_fields


class PlainRanked(Sequence[Chunk]):
    """Chunks best first, each built from its validated fields when read (none has a summary)."""

    __slots__ = ("_rows", "_ids", "_order")

    def __init__(self, rows: list[PlainFields], ids: list[str], order: list[int]) -> None:
        self._rows = rows  # (text, id, score, title) of each input dict, in input order
        self._ids = ids  # their ids (given or defaulted), in input order
        self._order = order  # their input positions, best first

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, i: int) -> Chunk: ...
    @overload
    def __getitem__(self, i: slice) -> PlainRanked: ...
    def __getitem__(self, i: int | slice) -> Chunk | PlainRanked:
        if isinstance(i, slice):
            return PlainRanked(self._rows, self._ids, self._order[i])
        at = self._order[i]
        return plain_chunk(self._rows[at], at)

    def __iter__(self) -> Iterator[Chunk]:
        rows = self._rows
        for at in self._order:
            yield plain_chunk(rows[at], at)

    def scan(self, start: int) -> Iterator[tuple[str, str | None, bool]]:
        """(text, title, has a summary) of each chunk from rank ``start`` on, read without building
        it (a plain chunk has no summary)."""
        rows, order = self._rows, self._order
        for k in range(start, len(order)):
            text, _, _, title = rows[order[k]]
            yield text, title or None, False

    def pick(self, ats: list[int]) -> PlainRanked:
        """The chunks at ranks ``ats``, still lazy."""
        order = self._order
        return PlainRanked(self._rows, self._ids, [order[at] for at in ats])

    def ids(self) -> list[str]:
        """The chunks' ids, best first, without building them."""
        ids = self._ids
        return [ids[at] for at in self._order]


def rank_plain(items: Any) -> tuple[PlainRanked, dict[str, int], str] | None:
    """``items`` ranked lazily (best first; ties, or no scores at all, keep input order), each id's
    input position, and what ranked them (``given`` or ``input order``); None unless ``items`` is a
    list or tuple of plain dicts (see :func:`edgewise.chunk.plain_fields`) with distinct ids and a
    score on every one or on none.
    """
    if type(items) is not list and type(items) is not tuple:
        return None
    rows: list[PlainFields] = []
    ids: list[str] = []
    scores: list[float | None] = []
    for at, obj in enumerate(items):
        fields = plain_fields(obj)
        if fields is None:
            return None
        rows.append(fields)
        cid = fields[1]
        ids.append(f"chunk-{at}" if cid is None else cid)
        scores.append(fields[2])
    input_index = dict(zip(ids, range(len(ids))))
    if len(input_index) < len(ids):
        return None
    if None not in scores:  # a stable sort, as rank() sorts given scores: ties keep input order
        return PlainRanked(rows, ids, sorted(range(len(ids)), key=scores.__getitem__, reverse=True)), input_index, "given"
    if scores.count(None) == len(scores):
        return PlainRanked(rows, ids, list(range(len(ids)))), input_index, "input order"
    return None
