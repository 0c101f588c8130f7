"""Strict reading of input: UTF-8 bytes (:func:`decode`) and chunk lists, a JSON array or JSON Lines,
refused with the byte, line or field at fault.

Every item must be an object or a string, every number finite, every string valid Unicode, and
nothing nested more than :data:`MAX_DEPTH` levels deep; the common, clean input is parsed once by
a C decoder and walked field by field only when it may hold a bad value.

The decoder is orjson where it is installed (the ``serve`` and ``ray`` extras bring it) and the text
is long enough for it to pay (:data:`ORJSON_MIN` characters), else Python's json. orjson's value
counts only where it is the value Python's json gives: orjson refuses ``NaN``, ``Infinity``, numbers
beyond a float and lone surrogates (the text is then read by Python's json, whose reading names
the field at fault), and reads an integer beyond 64 bits as a float, so a value holding a float of
magnitude ``>= 2**63`` is read again too (it may have been such an integer). The walk that looks for
those floats also measures the nesting, so a clean item is walked once.
"""

from __future__ import annotations

import json
import math
from itertools import chain, compress, repeat
from operator import is_
from typing import Any

from .. import compiled
from ..errors import InputError

_BOM = b"\xef\xbb\xbf"


def decode(data: bytes, source: str) -> str:
    """Strict UTF-8 text of ``data``; a leading BOM is dropped. ``source`` names the bytes in errors.

    >>> decode(b"\\xef\\xbb\\xbfhi", "x")
    'hi'
    >>> decode(b"caf\\xe9 noir", "query file 'q.txt'")
    Traceback (most recent call last):
    ...
    edgewise.errors.InputError: query file 'q.txt' must be UTF-8 text, but byte offset 3 (0xE9) is not UTF-8 (invalid continuation byte); save it as UTF-8
    """
    skip = len(_BOM) if data.startswith(_BOM) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = skip + exc.start
        raise InputError(
            f"{source} must be UTF-8 text, but byte offset {offset} (0x{data[offset]:02X}) is not UTF-8 "
            f"({exc.reason}); save it as UTF-8"
        ) from None


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
        data = quick(text)
        if type(data) is list and all(map(clean, data)):
            for index, item in enumerate(data):
                _check_item(item, f"{source} chunk #{index}", False, False)
            return data
        data, suspect = parser.parse(text, None)
        deep = text.count("[") + text.count("{") > MAX_DEPTH
        for index, item in enumerate(data):
            _check_item(item, f"{source} chunk #{index}", suspect, deep)
        return data
    items = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip(" \t\r"):
            continue
        item = quick(line)
        if item is not UNREAD and clean(item):
            _check_item(item, f"{source} line {lineno} (chunk #{len(items)})", False, False)
        else:
            item, suspect = parser.parse(line, lineno)
            deep = line.count("[") + line.count("{") > MAX_DEPTH
            _check_item(item, f"{source} line {lineno} (chunk #{len(items)})", suspect, deep)
        items.append(item)
    return items


#: texts at least this long are read by orjson first, where installed (below it, Python's json is as quick)
ORJSON_MIN = 2048
#: what :func:`quick` returns when orjson did not read the text
UNREAD = object()
_BIG = 2.0 ** 63  # orjson reads an integer past 64 bits as a float at least this large
_CONTAINERS = frozenset((dict, list))
_orjson: Any = None  # the module once imported; False when it is not installed
_within = None if compiled.module is None else compiled.module.within  # not built: clean_py


def quick(data: str | bytes, minimum: int | None = None) -> Any:
    """orjson's value of ``data``, or :data:`UNREAD` when orjson did not read it: shorter than
    ``minimum`` characters (default :data:`ORJSON_MIN`), orjson not installed, or refused by it (bad
    JSON, ``NaN``, ``1e999``, a lone surrogate, a BOM, bytes that are not UTF-8: Python's json then
    reads it and says why). Use the value only where :func:`clean` holds."""
    global _orjson
    if len(data) < (ORJSON_MIN if minimum is None else minimum) or _orjson is False:
        return UNREAD
    if _orjson is None:
        try:
            import orjson as _orjson
        except ImportError:
            _orjson = False
            return UNREAD
    try:
        return _orjson.loads(data)
    except ValueError:  # orjson.JSONDecodeError: Python's json reads it, and names what is wrong
        return UNREAD


def clean(value: Any) -> bool:
    """Whether ``value``, as orjson read it, is what Python's json reads and within the depth rule: no
    float of magnitude ``>= 2**63`` (it may have been an integer beyond 64 bits) and no object or array
    :data:`MAX_DEPTH` levels below it (``value`` is level 0). In C where ``edgewise._scan`` is built
    (``within``), else :func:`clean_py`.

    >>> clean({"text": "a", "meta": {"n": 2.0 ** 63}}), clean({"text": "a", "score": 0.5})
    (False, True)
    """
    if _within is not None:
        return _within(value, MAX_DEPTH, _BIG)
    return clean_py(value)


def clean_py(value: Any) -> bool:
    """:func:`clean` in Python: a level at a time, each level's values read by type in C (a row of 200
    chunks is three levels of a few hundred values)."""
    kind = type(value)
    if kind is float:
        return -_BIG < value < _BIG
    if kind is not dict and kind is not list:
        return True
    level: list[Any] = [value]
    depth = 0
    while level:
        if depth == MAX_DEPTH:
            return False
        kinds = set(map(type, level))
        if kinds == {dict}:
            items = list(chain.from_iterable(map(dict.values, level)))
        elif kinds == {list}:
            items = list(chain.from_iterable(level))
        else:
            items = list(chain.from_iterable([v.values() if type(v) is dict else v for v in level]))
        types = list(map(type, items))
        found = set(types)
        if float in found and max(map(abs, compress(items, map(is_, types, repeat(float))))) >= _BIG:
            return False
        level = list(compress(items, map(_CONTAINERS.__contains__, types))) if found & _CONTAINERS else []
        depth += 1
    return True


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
