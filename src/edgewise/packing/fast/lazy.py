"""Plain input chunks validated and ranked without building a record for each.

A pack of 20,000 retrieved dicts of which 20 fit should pay for reading 20,000 dicts, not for
building 20,000 :class:`~edgewise.chunk.Chunk` records it will only report as dropped.
:func:`rank_plain` validates the caller's dicts as :func:`edgewise.chunk.plain_fields` validates
one (a column at a time) and ranks them as :func:`edgewise.score.ranking.rank` ranks given scores;
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

import math
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any, overload

from ...chunk import Chunk, plain_chunk


class PlainRanked(Sequence[Chunk]):
    """Chunks best first, each built from its validated fields when read (none has a summary)."""

    __slots__ = ("_texts", "_ids", "_scores", "_titles", "_order")

    def __init__(self, columns: tuple[list[str], list[str], list[Any], list[Any]], order: list[int]) -> None:
        # each input dict's text, id (given or defaulted), score and title, in input order
        self._texts, self._ids, self._scores, self._titles = columns
        self._order = order  # input positions, best first

    def _columns(self) -> tuple[list[str], list[str], list[Any], list[Any]]:
        return self._texts, self._ids, self._scores, self._titles

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, i: int) -> Chunk: ...
    @overload
    def __getitem__(self, i: slice) -> PlainRanked: ...
    def __getitem__(self, i: int | slice) -> Chunk | PlainRanked:
        if isinstance(i, slice):
            return PlainRanked(self._columns(), self._order[i])
        at = self._order[i]
        return plain_chunk(self._texts[at], self._ids[at], self._scores[at], self._titles[at])

    def __iter__(self) -> Iterator[Chunk]:
        texts, ids, scores, titles = self._columns()
        for at in self._order:
            yield plain_chunk(texts[at], ids[at], scores[at], titles[at])

    def scan(self, start: int) -> Iterator[tuple[str, str | None, bool]]:
        """(text, title, has a summary) of each chunk from rank ``start`` on, read without building
        it (a plain chunk has no summary; its title may be empty where the chunk's is None)."""
        return zip(self._column_from(self._texts, start), self._column_from(self._titles, start), repeat(False))

    def columns(self) -> tuple[list[str], list[Any], list[str], list[int]]:
        """The texts, titles and ids columns, in input order, and the input positions best first
        (the lists themselves: not to be changed)."""
        return self._texts, self._titles, self._ids, self._order

    def id_at(self, i: int) -> str:
        """The id of the chunk at rank ``i``, without building it."""
        return self._ids[self._order[i]]

    def _column_from(self, column: list[Any], start: int) -> Iterator[Any]:
        return map(column.__getitem__, map(self._order.__getitem__, range(start, len(self._order))))

    def ids_scores(self) -> Iterator[tuple[str, float | None]]:
        """(id, score) of each chunk, best first, without building it."""
        order = self._order
        return zip(map(self._ids.__getitem__, order), map(self._scores.__getitem__, order))

    def ids(self) -> list[str]:
        """The chunks' ids, best first, without building them."""
        ids = self._ids
        return [ids[at] for at in self._order]


_get = dict.get
_NONE = type(None)


Columns = tuple[list[str], list[Any], list[Any], list[Any], int, int]


def plain_columns(items: Any) -> Columns | None:
    """The texts, ids, scores and titles of ``items`` (a non-empty list or tuple of dicts), a column
    each, with how many have no id and no score; None unless every item is a plain dict (as
    :func:`edgewise.chunk.plain_fields` accepts one: text a str, id and title a str or absent,
    score a finite float or absent, no tokens or meta): the rule of :func:`edgewise.chunk.plain_fields`
    applied a column at a time (``tests/tokens/test_scan.py`` holds the two equal).

    Checked a column at a time (every text, then every id...), each check one pass in C.
    """
    if (type(items) is not list and type(items) is not tuple) or set(map(type, items)) != {dict}:
        return None
    n = len(items)
    texts = list(map(_get, items, repeat("text")))
    ids = list(map(_get, items, repeat("id")))
    scores = list(map(_get, items, repeat("score")))
    titles = list(map(_get, items, repeat("title")))
    id_types, title_types, score_types = set(map(type, ids)), set(map(type, titles)), set(map(type, scores))
    if set(map(type, texts)) != {str} or not id_types <= {str, _NONE} or not title_types <= {str, _NONE} or not score_types <= {float, _NONE}:
        return None
    # (a column with no None needs no count of them: a pass that compares every value with None)
    missing_ids = ids.count(None) if _NONE in id_types else 0
    missing_scores = scores.count(None) if _NONE in score_types else 0
    if not all(map(math.isfinite, scores if not missing_scores else [s for s in scores if s is not None])):
        return None
    # a key other than the four read (or one of them set to None) is allowed unless it is tokens or meta
    missing_titles = titles.count(None) if _NONE in title_types else 0
    if sum(map(len, items)) != 4 * n - missing_ids - missing_scores - missing_titles and any(
            _get(d, "tokens") is not None or _get(d, "meta") is not None for d in items):
        return None
    return texts, ids, scores, titles, missing_ids, missing_scores


def rank_plain(items: Any) -> tuple[PlainRanked, dict[str, int], str] | None:
    """``items`` ranked lazily (best first; ties, or no scores at all, keep input order), each id's
    input position, and what ranked them (``given`` or ``input order``); None unless ``items`` is a
    non-empty list or tuple of plain dicts (each one :func:`edgewise.chunk.plain_fields` accepts)
    with distinct ids and a score on every one or on none. Read by :func:`plain_columns`.
    """
    columns = plain_columns(items)
    if columns is None:
        return None
    texts, ids, scores, titles, missing_ids, missing_scores = columns
    n = len(texts)
    if missing_scores not in (0, n):
        return None
    if missing_ids:
        ids = [f"chunk-{at}" if cid is None else cid for at, cid in enumerate(ids)]
    input_index = dict(zip(ids, range(n)))
    if len(input_index) < n:
        return None
    if missing_scores:
        return PlainRanked((texts, ids, scores, titles), list(range(n))), input_index, "input order"
    # a stable sort, as rank() sorts given scores: ties keep input order
    return PlainRanked((texts, ids, scores, titles), sorted(range(n), key=scores.__getitem__, reverse=True)), input_index, "given"


# Reads of ranked chunks that a lazy sequence answers from its columns and a list of chunks by
# building nothing new: the steps that skip, record or look over many chunks call these.


def scan(chunks: Sequence[Chunk], start: int) -> Iterator[tuple[str, str | None, bool]]:
    """(text, title, has a summary) of each chunk from ``start`` on (no copy of the chunks)."""
    if isinstance(chunks, PlainRanked):
        return chunks.scan(start)
    return ((c.text, c.title, bool(c.meta) and c.summary is not None)
            for c in map(chunks.__getitem__, range(start, len(chunks))))


def id_at(chunks: Sequence[Chunk], i: int) -> str:
    """The id of the chunk at ``i`` (a lazy sequence builds none)."""
    return chunks.id_at(i) if isinstance(chunks, PlainRanked) else chunks[i].id


def columns(chunks: Sequence[Chunk]) -> tuple[list[str], list[Any], list[str], list[int]] | None:
    """A lazy sequence's texts, titles, ids and order (see :meth:`PlainRanked.columns`), else None."""
    return chunks.columns() if isinstance(chunks, PlainRanked) else None


def has_summaries(chunks: Sequence[Chunk]) -> bool:
    """Whether any of ``chunks`` has a summary (none of a lazy sequence's can)."""
    return not isinstance(chunks, PlainRanked) and any(c.meta and c.summary for c in chunks)


def ids_scores(chunks: Sequence[Chunk]) -> Iterable[tuple[str, float | None]]:
    """(id, score) of each chunk, in order (a lazy sequence builds none)."""
    return chunks.ids_scores() if isinstance(chunks, PlainRanked) else ((c.id, c.score) for c in chunks)


def ids(chunks: Sequence[Chunk]) -> list[str]:
    """The chunks' ids, in order (a lazy sequence builds none)."""
    return chunks.ids() if isinstance(chunks, PlainRanked) else [c.id for c in chunks]
