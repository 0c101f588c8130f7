"""Chunks: the retrieved passages edgewise packs, read from JSON, JSONL or plain strings.

Field names follow what RAG pipelines already emit: ``id``, ``text``, ``score``, ``title``,
``tokens`` and ``meta`` (``summary``, ``summary_tokens``, ``source``...).

>>> chunks, merged = normalize(["first passage", {"text": "second", "score": 0.5}])
>>> [c.id for c in chunks], merged
(['chunk-0', 'chunk-1'], [])
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InputError

_FIELDS = ("id", "text", "score", "title", "tokens", "meta")


@dataclass(frozen=True)
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
        if tokens is not None and (
            isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0
        ):
            raise InputError(f"{where}: tokens must be a non-negative integer, but got {tokens!r}")
        meta = obj.get("meta") or {}
        if not isinstance(meta, Mapping):
            raise InputError(f"{where}: meta must be an object, but got {type(meta).__name__}")
        summary = meta.get("summary")
        if summary is not None and not isinstance(summary, str):
            raise InputError(
                f"{where}: meta.summary must be a string, but got {type(summary).__name__}"
            )
        return cls(id=cid, text=text, score=score, title=title or None, tokens=tokens, meta=dict(meta))


def _number(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):  # some retrievers emit scores as strings ("1.0510446")
        try:
            value = float(value)
        except ValueError:
            raise InputError(f"{what} must be a number, but got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{what} must be a number, but got {value!r}")
    if not math.isfinite(value):
        raise InputError(f"{what} must be finite, but got {value!r}")
    return float(value)


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

    A duplicated id keeps the occurrence with the highest score, at the position where the id
    was first seen; the others are returned as ``Merged`` records so nothing is lost silently.

    >>> chunks, merged = normalize([{"id": "a", "text": "x", "score": 0.1},
    ...                             {"id": "b", "text": "y", "score": 0.5},
    ...                             {"id": "a", "text": "z", "score": 0.9}])
    >>> [(c.id, c.text) for c in chunks], [(m.index, m.kept_index) for m in merged]
    ([('a', 'z'), ('b', 'y')], [(0, 2)])
    """
    if isinstance(items, (str, bytes, Mapping)):
        raise InputError(f"chunks must be a list, but got {type(items).__name__}")
    slots: dict[str, int] = {}  # id -> slot in `kept`
    kept: list[tuple[int, Chunk]] = []  # (input index, chunk)
    merged: list[Merged] = []
    for index, item in enumerate(items):
        chunk = Chunk.from_dict(item, index)
        slot = slots.get(chunk.id)
        if slot is None:
            slots[chunk.id] = len(kept)
            kept.append((index, chunk))
            continue
        old_index, old = kept[slot]
        if (chunk.score if chunk.score is not None else -math.inf) > (
            old.score if old.score is not None else -math.inf
        ):
            kept[slot] = (index, chunk)
            loser, winner = old_index, index
        else:
            loser, winner = index, old_index
        merged.append(
            Merged(chunk.id, loser, winner, f"duplicate id: merged into input #{winner}, which has the higher score")
        )
    # A loser may have been an earlier winner: point every record at the final survivor.
    final = {chunk.id: index for index, chunk in kept}
    merged = [
        Merged(m.id, m.index, final[m.id], f"duplicate id: merged into input #{final[m.id]}, which has the higher score")
        for m in merged
    ]
    return [chunk for _, chunk in kept], merged


def loads(text: str, source: str = "<input>") -> list[Any]:
    """Parse a JSON array or JSON Lines text into raw items (dicts or strings).

    Errors name the source and the line: ``chunks.jsonl line 3: invalid JSON (...)``.

    >>> loads('{"text": "a"}\\n"b"\\n')
    [{'text': 'a'}, 'b']
    """
    stripped = text.lstrip()
    if not stripped:
        return []
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{source} line {exc.lineno}: invalid JSON ({exc.msg})") from None
        if not isinstance(data, list):
            raise InputError(f"{source} must hold a JSON array or JSON Lines, but got {type(data).__name__}")
        return data
    items = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputError(f"{source} line {lineno}: invalid JSON ({exc.msg})") from None
    return items
