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
    """The common input, validated without a field-by-field walk: a dict whose text and id are
    strings (or no id), score a finite float or absent, title a string or absent, and no tokens or
    meta. The Chunk is built straight into its slots (a frozen dataclass's ``__init__`` goes through
    ``object.__setattr__`` per field). ``None`` for anything else, which :meth:`Chunk.from_dict`
    then checks field by field; both give the same Chunk.
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
    chunk = _new(Chunk)
    _ID(chunk, f"chunk-{index}" if cid is None else cid)
    _TEXT(chunk, text)
    _SCORE(chunk, score)
    _TITLE(chunk, title or None)
    _TOKENS(chunk, None)
    _META(chunk, {})
    return chunk


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

    A duplicated id keeps the occurrence with the highest score, at the position where the id
    was first seen; the others are returned as ``Merged`` records so nothing is lost silently.

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
    merged: list[Merged] = []
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
        if (chunk.score if chunk.score is not None else -math.inf) > (
            old.score if old.score is not None else -math.inf
        ):
            chunks[slot] = chunk
            loser, winner = at[slot], index
            at[slot] = index
        else:
            loser, winner = index, at[slot]
        merged.append(
            Merged(chunk.id, loser, winner, f"duplicate id: merged into input #{winner}, which has the higher score")
        )
    if at is None:  # the common case: no duplicates, input positions are list positions
        return chunks, merged, slots
    # A loser may have been an earlier winner: point every record at the final survivor.
    final = {chunk.id: index for index, chunk in zip(at, chunks)}
    merged = [
        Merged(m.id, m.index, final[m.id], f"duplicate id: merged into input #{final[m.id]}, which has the higher score")
        for m in merged
    ]
    return chunks, merged, None


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


def loads(text: str, source: str = "<input>") -> list[Any]:
    r"""Parse a JSON array or JSON Lines text into raw items (dicts or strings).

    JSON Lines are split on ``\n`` only (a raw U+2028 inside a string is text, as JSON says) and may
    end in ``\r\n``; a leading BOM is ignored; blank lines are skipped. Every item must be an object
    or a string, every number finite, every string valid Unicode, and nothing nested more than
    ``MAX_DEPTH`` levels deep. Errors name the source, the line and the chunk.

    >>> loads('{"text": "a"}\r\n"b\u2028c"\n')
    [{'text': 'a'}, 'b\u2028c']
    >>> loads('{"text": "a", "score": 1e999}', "chunks.jsonl")
    Traceback (most recent call last):
    ...
    edgewise.errors.InputError: chunks.jsonl line 1 (chunk #0): score must be a finite number (within ±1.8e308), but got 1e999
    """
    text = text.removeprefix("\ufeff")
    if not text.strip(" \t\r\n"):
        return []
    parser = _Parser(source)
    if text.lstrip(" \t\r\n").startswith("["):
        data, suspect = parser.parse(text, None)
        deep = text.count("[") + text.count("{") > MAX_DEPTH
        for index, item in enumerate(data):
            _check_item(item, f"{source} chunk #{index}", suspect, deep)
        return data
    items = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip(" \t\r"):
            continue
        item, suspect = parser.parse(line, lineno)
        deep = line.count("[") + line.count("{") > MAX_DEPTH
        _check_item(item, f"{source} line {lineno} (chunk #{len(items)})", suspect, deep)
        items.append(item)
    return items


MAX_DEPTH = 50  # levels of objects and arrays inside one chunk; real metadata needs a handful
_FLOAT_LIMIT = "within ±1.8e308"


class _BadNumber:
    """A JSON number that is no finite float (NaN, Infinity, 1e999, 400 digits): refused with its field."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal

    def shown(self) -> str:
        lit = self.literal
        return lit if len(lit) <= 24 else f"{lit[:12]}... ({len(lit.lstrip('-'))} digits)"


class _Parser:
    """Parse JSON texts of one source; a number no float holds becomes a ``_BadNumber`` to report."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.bad = False  # whether the last text parsed held a _BadNumber
        self.decoder = json.JSONDecoder(parse_int=self.integer, parse_float=self.real, parse_constant=self.constant)

    def integer(self, literal: str) -> int | _BadNumber:
        if len(literal) <= 400:  # longer is beyond any float (and int() refuses 4,300+ digits)
            value = int(literal)
            try:
                float(value)
                return value
            except OverflowError:
                pass
        return self.constant(literal)

    def real(self, literal: str) -> float | _BadNumber:
        value = float(literal)
        return value if math.isfinite(value) else self.constant(literal)

    def constant(self, literal: str) -> _BadNumber:  # also NaN, Infinity, -Infinity: not JSON
        self.bad = True
        return _BadNumber(literal)

    def parse(self, text: str, lineno: int | None) -> tuple[Any, bool]:
        """The value of ``text`` (line ``lineno`` of the source, or all of it), and whether it may hold a
        bad number or a lone surrogate (rarely: then it is walked field by field)."""
        where = self.source if lineno is None else f"{self.source} line {lineno}"
        self.bad = False
        try:
            data = self.decoder.decode(text)
        except json.JSONDecodeError as exc:
            at = f"{self.source} line {exc.lineno}" if lineno is None else where
            raise InputError(f"{at}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:
            raise InputError(
                f"{where}: JSON must be nested at most {MAX_DEPTH} levels deep, but it is nested too deep to parse"
            ) from None
        # A lone surrogate comes from a "\\ud800"-style escape, or was in the text already.
        return data, self.bad or "\\ud" in text or "\\uD" in text or lone_surrogate(text) is not None


def _kind(value: Any) -> str:
    """How a JSON value is named in an error: ``a number (5)``, ``an array``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({str(value)[:24]})"
    if isinstance(value, _BadNumber):
        return f"a number ({value.shown()})"
    return "an array" if isinstance(value, list) else type(value).__name__


def _field(path: str, key: Any) -> str:
    """``meta.source``, ``meta.tags[2]``, ``meta["odd key"]``: a field path that stays on one line."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key[:40])}]"


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in ``text`` (text that cannot be written as UTF-8), or None.

    >>> lone_surrogate("ok"), lone_surrogate("ab\\ud800"), lone_surrogate("café")
    (None, 2, None)
    """
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _check_item(item: Any, where: str, suspect: bool, deep: bool) -> None:
    """Refuse an item that is no chunk, nests too deep (if ``deep``: its text has that many brackets),
    or holds a bad number or string (if ``suspect``)."""
    if not isinstance(item, (dict, str)):
        raise InputError(f"{where}: a chunk must be a JSON object or a string, but got {_kind(item)}")
    if suspect or (deep and _too_deep(item)):
        _explain(item, where)


def _too_deep(item: Any) -> bool:
    level, depth = [item], 0  # breadth first, one level at a time: a chunk has few levels
    while level:
        if depth == MAX_DEPTH:
            return True
        level = [c for v in level for c in (v.values() if type(v) is dict else v) if type(c) in _CONTAINERS]
        depth += 1
    return False


_CONTAINERS = (dict, list)


def _explain(item: Any, where: str) -> None:
    """Walk ``item`` naming each field, and raise for the first bad one in document order."""
    stack: list[tuple[Any, str, int]] = [(item, "" if isinstance(item, dict) else "text", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            at = lone_surrogate(value)
            if at is not None:
                raise InputError(
                    f"{where}: {path} must be valid Unicode, but character {at + 1} is a lone surrogate "
                    f"U+{ord(value[at]):04X}"
                )
        elif isinstance(value, _BadNumber):
            rule = "a finite number" if value.literal.lstrip("-")[:1].isalpha() else f"a finite number ({_FLOAT_LIMIT})"
            raise InputError(f"{where}: {path} must be {rule}, but got {value.shown()}")
        elif isinstance(value, (dict, list)):
            if depth == MAX_DEPTH:
                shown = path if len(path) <= 60 else path[:60] + "..."
                raise InputError(f"{where}: JSON must be nested at most {MAX_DEPTH} levels deep, but {shown} is deeper")
            if isinstance(value, dict):
                for key in value:
                    at = lone_surrogate(key)
                    if at is not None:
                        raise InputError(
                            f"{where}: the key {json.dumps(key[:40])} in {path or 'the chunk'} must be valid "
                            f"Unicode, but character {at + 1} is a lone surrogate U+{ord(key[at]):04X}"
                        )
                entries = list(value.items())
            else:
                entries = list(enumerate(value))
            stack.extend((child, _field(path, key), depth + 1) for key, child in reversed(entries))
