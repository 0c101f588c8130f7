"""JSON numbers kept as they came: what lets the proxy forward every field it does not change as sent.

Python's json reads a number into an ``int`` or a ``float`` and writes it back in its own spelling,
which is not always the client's: ``1.10`` comes back ``1.1``, ``1E5`` ``100000.0``, ``-0`` ``0``,
a float with more digits than a double holds is rounded (``1.999...`` with 5,000 nines becomes
``2.0``), ``1e400`` is infinite, and an integer past ``sys.get_int_max_str_digits()`` digits is not
read at all. :func:`number` keeps such a literal as a :class:`RawNumber` (every other number is the
``int`` or ``float`` that writes back the same text), and :func:`dumps` writes a value with its
raw numbers as they came.

>>> value = json.loads('{"a": 1.10, "b": -0, "c": 1e400, "d": 0.5, "e": 12}', parse_float=number, parse_int=number)
>>> value
{'a': 1.10, 'b': -0, 'c': 1e400, 'd': 0.5, 'e': 12}
>>> dumps(value)
'{"a": 1.10, "b": -0, "c": 1e400, "d": 0.5, "e": 12}'
"""

from __future__ import annotations

import json
import sys
from typing import Any

_encode_str = json.encoder.encode_basestring  # the C writer of a str, non-ASCII as it is (ensure_ascii=False)


def max_digits() -> int:
    """The digits an ``int()`` of a string may have (``sys.get_int_max_str_digits``; 0: no limit)."""
    get = getattr(sys, "get_int_max_str_digits", None)  # Python 3.11+; 0 means no limit
    return (get() or 0) if get is not None else 0


class RawNumber:
    """A JSON number that Python's json would not write back as it came, kept as its literal text.

    Not a number to Python (a field the proxy reads as a number, such as ``max_tokens``, gets the
    field's own error, with the literal as the client wrote it); :func:`dumps` writes it as it came.
    """

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal

    def __repr__(self) -> str:
        text = self.literal
        return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawNumber) and other.literal == self.literal

    def __hash__(self) -> int:
        return hash(self.literal)

    @property
    def is_integer(self) -> bool:
        """Written as an integer (no fraction, no exponent)."""
        return not any(c in self.literal for c in ".eE")


def number(literal: str) -> Any:
    """``json``'s ``parse_int`` and ``parse_float``: the ``int`` or ``float`` that writes back as
    ``literal``, else a :class:`RawNumber` (also for an integer too long for ``int()``)."""
    if not any(c in literal for c in ".eE"):
        limit = max_digits()
        if literal == "-0" or (limit and len(literal.lstrip("-")) > limit):
            return RawNumber(literal)
        return int(literal)
    value = float(literal)
    return value if float.__repr__(value) == literal else RawNumber(literal)


def has_raw(value: Any) -> bool:
    """Whether ``value`` holds a :class:`RawNumber` anywhere."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is RawNumber:
            return True
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
    return False


def dumps(value: Any, *, compact: bool = False, allow_nan: bool = False) -> str:
    """``value`` as JSON text (non-ASCII as it is; ``NaN`` and infinities refused unless
    ``allow_nan``), each :class:`RawNumber` written as it came; ``compact``: no spaces after ``,``
    and ``:``."""
    separators = (",", ":") if compact else (", ", ": ")
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=allow_nan, separators=separators)
    except TypeError:  # a RawNumber (or a value no JSON holds: the writer below refuses it too)
        parts: list[str] = []
        _write(value, parts.append, *separators, allow_nan)
        return "".join(parts)


def _write(value: Any, out: Any, item: str, key: str, allow_nan: bool) -> None:
    if isinstance(value, RawNumber):
        out(value.literal)
    elif isinstance(value, str):
        out(_encode_str(value))
    elif isinstance(value, dict):
        out("{")
        first = True
        for k, v in value.items():
            if not first:
                out(item)
            first = False
            if not isinstance(k, str):
                raise TypeError(f"keys must be str, not {type(k).__name__}")
            out(_encode_str(k))
            out(key)
            _write(v, out, item, key, allow_nan)
        out("}")
    elif isinstance(value, (list, tuple)):
        out("[")
        for i, v in enumerate(value):
            if i:
                out(item)
            _write(v, out, item, key, allow_nan)
        out("]")
    else:  # numbers, booleans, None, and what json refuses (with its own message)
        out(json.dumps(value, ensure_ascii=False, allow_nan=allow_nan))
