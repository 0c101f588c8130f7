"""Chunks: the retrieved passages edgewise packs, read from JSON, JSONL or plain strings.

Field names follow what RAG pipelines already emit: ``id``, ``text``, ``score``, ``title``,
``tokens`` and ``meta`` (``summary``, ``summary_tokens``, ``source``...).

>>> chunks, merged = normalize(["a passage", {"text": "second", "score": 0.5}])
>>> [c.id for c in chunks], merged
(['chunk-0', 'chunk-1'], [])
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .checks import check_int, check_number
from .errors import InputError

_FIELDS = ("id", "text", "score", "title", "tokens", "meta")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrieved passage.

    >>> Chunk(id="a", text="Paris is the capital of France.", score=0.9).summary is None
    True
    """

    id: str
    text: str
    score: float | None = None
    title: str | None = None
    tokens: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> str | None:
        """The caller-supplied summary (``meta.summary``), if any."""
        value = self.meta.get("summary")
        return value if isinstance(value, str) and value.strip() else None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict; fields that are unset are left out."""
        out: dict[str, Any] = {"id": self.id, "text": self.text}
        for name in ("score", "title", "tokens"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.meta:
            out["meta"] = dict(self.meta)
        return out

    @classmethod
    def from_dict(cls, obj: Any, index: int = 0) -> Chunk:
        """Validate one input item (a dict, a plain string or a Chunk) into a Chunk.

        ``index`` is the item's input position: it names the item in errors and gives
        a missing id its stable default, ``chunk-<index>``.
        """
        fast = _plain(obj, index)
        if fast is not None:
            return fast
        if isinstance(obj, Chunk):
            obj = obj.to_dict()
        if isinstance(obj, str):
            return cls(id=f"chunk-{index}", text=obj)
        if not isinstance(obj, Mapping):
            raise InputError(
                f"chunk #{index} must be a JSON object or a string, but got {type(obj).__name__}"
            )
        where = f"chunk #{index}"
        if "text" not in obj:
            alias = next((k for k in ("content", "page_content") if k in obj), None)
            if alias is None:
                raise InputError(f"{where} must have a 'text' field, but it has {sorted(obj)}")
            obj = {**obj, "text": obj[alias]}
        text = obj["text"]
        if not isinstance(text, str):
            raise InputError(f"{where}: text must be a string, but got {type(text).__name__}")
        raw_id = obj.get("id")
        if raw_id is None:
            cid = f"chunk-{index}"
        elif isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool):
            cid = str(raw_id)
        else:
            raise InputError(f"{where}: id must be a string, but got {raw_id!r}")
        where = f"chunk {cid!r} (#{index})"
        score = _number(obj.get("score"), f"{where}: score")
        title = obj.get("title")
        if title is not None and not isinstance(title, str):
            raise InputError(f"{where}: title must be a string, but got {type(title).__name__}")
        tokens = obj.get("tokens")
        if tokens is not None:
            check_int(f"{where}: tokens", tokens, minimum=0)
        meta = obj.get("meta") or {}
        if not isinstance(meta, Mapping):
            raise InputError(f"{where}: meta must be an object, but got {type(meta).__name__}")
        summary = meta.get("summary")
        if summary is not None and not isinstance(summary, str):
            raise InputError(
                f"{where}: meta.summary must be a string, but got {type(summary).__name__}"
            )
        return cls(id=cid, text=text, score=score, title=title or None, tokens=tokens, meta=dict(meta))


_new = object.__new__
# the slots' own setters: they skip the frozen dataclass's __setattr__, one call per field
_ID, _TEXT, _SCORE, _TITLE, _TOKENS, _META = (Chunk.__dict__[f].__set__ for f in _FIELDS)


def _plain(obj: Any, index: int) -> Chunk | None:
    """The common input, validated without a field-by-field walk (see :func:`plain_fields`) and
    built by :func:`plain_chunk`. ``None`` for anything else, which :meth:`Chunk.from_dict` then
    checks field by field; both give the same Chunk.
    """
    fields = plain_fields(obj)
    if fields is None:
        return None
    text, cid, score, title = fields
    return plain_chunk(text, f"chunk-{index}" if cid is None else cid, score, title)


def plain_chunk(text: str, cid: str, score: float | None, title: str | None) -> Chunk:
    """The Chunk of a plain input's validated fields (see :func:`plain_fields`), built straight
    into its slots (a frozen dataclass's ``__init__`` goes through ``object.__setattr__`` per field)."""
    chunk = _new(Chunk)
    _ID(chunk, cid)
    _TEXT(chunk, text)
    _SCORE(chunk, score)
    _TITLE(chunk, title or None)
    _TOKENS(chunk, None)
    _META(chunk, {})
    return chunk


def plain_fields(obj: Any) -> tuple[str, str | None, float | None, str | None] | None:
    """(text, id, score, title) of a plain input: a dict whose text and id are strings (or no id),
    score a finite float or absent, title a string or absent, and no tokens or meta; else None.

    >>> plain_fields({"id": "a", "text": "t", "score": 0.5}), plain_fields({"text": "t", "score": 1})
    (('t', 'a', 0.5, None), None)
    """
    if type(obj) is not dict:
        return None
    get = obj.get
    text, cid, score, title = get("text"), get("id"), get("score"), get("title")
    if (type(text) is not str or (cid is not None and type(cid) is not str)
            or (score is not None and (type(score) is not float or score - score != 0.0))
            or (title is not None and type(title) is not str)):
        return None
    # any other key? (when every key is one of the four read, tokens and meta are absent)
    if len(obj) != 1 + (cid is not None) + (score is not None) + (title is not None) and (
            get("tokens") is not None or get("meta") is not None):
        return None
    return text, cid, score, title


def _number(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if type(value) is float and value - value == 0.0:  # the common case, finite, without a call (per chunk)
        return value
    if isinstance(value, str):  # some retrievers emit scores as strings ("1.0510446")
        try:
            value = float(value)
        except ValueError:
            raise InputError(f"{what} must be a number, but got {value!r}") from None
    return float(check_number(what, value))


@dataclass(frozen=True)
class Merged:
    """A duplicate id that was merged away: which input item and why."""

    id: str
    index: int
    kept_index: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "index": self.index, "kept_index": self.kept_index, "reason": self.reason}


def normalize(items: Iterable[Any]) -> tuple[list[Chunk], list[Merged]]:
    """Validate items into Chunks and merge duplicate ids.

    A duplicated id keeps the occurrence with the highest score (the first one seen on a tie), at
    the position where the id was first seen; the others are returned as ``Merged`` records so
    nothing is lost silently. A record's reason says why its occurrence lost, and whether its text
    differed from the kept one's (then that text is in no prompt).

    >>> chunks, merged = normalize([{"id": "a", "text": "x", "score": 0.1},
    ...                             {"id": "b", "text": "y", "score": 0.5},
    ...                             {"id": "a", "text": "z", "score": 0.9}])
    >>> [(c.id, c.text) for c in chunks], [(m.index, m.kept_index) for m in merged]
    ([('a', 'z'), ('b', 'y')], [(0, 2)])
    """
    chunks, merged, _ = _normalize(items)
    return chunks, merged


def _normalize(items: Iterable[Any]) -> tuple[list[Chunk], list[Merged], dict[str, int] | None]:
    """:func:`normalize`, plus each chunk's input position when no id was merged (else None)."""
    if isinstance(items, (str, bytes, Mapping)):
        raise InputError(f"chunks must be a list, but got {type(items).__name__}")
    slots: dict[str, int] = {}  # id -> slot in `chunks`
    chunks: list[Chunk] = []
    at: list[int] | None = None  # the input index of each slot, once a duplicate made them differ
    losers: list[tuple[int, Chunk]] = []  # (input index, chunk) of each occurrence merged away
    n = 0  # len(chunks)
    for index, item in enumerate(items):
        chunk = _plain(item, index) or Chunk.from_dict(item, index)
        slot = slots.setdefault(chunk.id, n)
        if slot == n:
            chunks.append(chunk)
            n += 1
            if at is not None:
                at.append(index)
            continue
        if at is None:
            at = list(range(n))
        old = chunks[slot]
        if _rank_score(chunk) > _rank_score(old):
            chunks[slot] = chunk
            losers.append((at[slot], old))
            at[slot] = index
        else:
            losers.append((index, chunk))
    if at is None:  # the common case: no duplicates, input positions are list positions
        return chunks, [], slots
    # A loser may have been an earlier winner: point every record at the final survivor.
    kept = {chunk.id: (index, chunk) for index, chunk in zip(at, chunks)}
    merged = [Merged(c.id, i, kept[c.id][0], _merge_reason(c, *kept[c.id])) for i, c in losers]
    merged.sort(key=lambda m: m.index)
    return chunks, merged, None


def _rank_score(chunk: Chunk) -> float:
    return chunk.score if chunk.score is not None else -math.inf


def _merge_reason(lost: Chunk, kept_index: int, kept: Chunk) -> str:
    """Why a duplicate occurrence was merged away, and whether its own text is lost with it."""
    why = "has the higher score" if _rank_score(kept) > _rank_score(lost) else "has the same score and comes first"
    if lost.text == kept.text:
        return f"duplicate id: merged into input #{kept_index}, which {why}"
    return f"duplicate id with another text: input #{kept_index} kept instead (it {why}); this text is in no prompt"


def normalize_indexed(items: Iterable[Any]) -> tuple[list[Chunk], dict[str, int], list[Merged]]:
    """:func:`normalize`, plus each surviving chunk's position in the caller's input.

    >>> chunks, index, merged = normalize_indexed([{"id": "a", "text": "x"}, {"id": "a", "text": "y", "score": 1}])
    >>> index, [m.index for m in merged]
    ({'a': 1}, [0])
    """
    chunks, merged, positions = _normalize(items)
    if positions is not None:
        return chunks, positions, merged
    taken = {m.index for m in merged} | {m.kept_index for m in merged}
    winners = {m.id: m.kept_index for m in merged}
    index: dict[str, int] = {}
    position = 0
    for chunk in chunks:  # chunks without duplicates fill the other input positions, in order
        if chunk.id in winners:
            index[chunk.id] = winners[chunk.id]
            continue
        while position in taken:
            position += 1
        index[chunk.id] = position
        position += 1
    return chunks, index, merged
