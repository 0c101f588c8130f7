"""JSON in and out of the ``/v1`` endpoints: orjson where it reads and writes what Python's json would.

A 200-chunk ``/v1/pack`` reads a ~150 KB body and writes a ~120 KB reply; Python's json takes
about as long for the two as the pack itself, orjson (where installed: the ``serve`` extra) about a
tenth of that. orjson is used only where the values are the same either way:

- **Reading.** orjson refuses ``NaN``/``Infinity``, numbers too large for a float and lone
  surrogates (Python's json takes them all; the endpoints then refuse them with their own
  messages), so a body orjson refuses is read again by Python's json, and it is that parse whose
  error or value counts. One difference would be silent: orjson reads an integer beyond 64 bits as
  a float (``-9223372036854775809`` as ``-9.223372036854776e+18``). A body whose parse holds a
  float of magnitude ``>= 2**63`` is therefore read again by Python's json too (it may have been
  such an integer), so a request's values never depend on which parser read them.
- **Writing.** Only a reply to a body orjson read (no ``NaN``, ``Infinity`` or lone surrogate came
  in). orjson refuses what it cannot write exactly (an integer beyond 64 bits, a lone surrogate, a
  key that is not a string), and the reply is then written by Python's json, as before. Numbers
  are spelled in the shortest form that reads back the same (``1e-05`` becomes ``0.00001``).

The walk that looks for those floats also counts the characters of the text fields (what the
``--max-chars`` limit and the ``edgewise_input_characters_total`` metric take), so the body is
walked once.

>>> read(b'{"query": "abc", "chunks": ["de", {"text": "f"}], "options": {"budget": 9}}')
({'query': 'abc', 'chunks': ['de', {'text': 'f'}], 'options': {'budget': 9}}, 6)
>>> read(b'{"options": {"budget": -9223372036854775809}}') is None  # Python's json reads it
True
>>> write({"prompt": "caf\\u00e9", "tokens": 3}, fast=True)
b'{"prompt":"caf\\xc3\\xa9","tokens":3}'
"""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # the serve extra brings it; without it every body goes through Python's json
    orjson = None  # type: ignore[assignment]

TEXT_FIELDS = ("query", "chunks", "text", "options")  # what --max-chars counts: strings in these fields
_BIG = 2.0 ** 63  # orjson reads an integer past 64 bits as a float at least this large


def available() -> bool:
    """Whether orjson is installed (else :func:`read` always returns None)."""
    return orjson is not None


def read(body: bytes) -> tuple[Any, int] | None:
    """``body`` parsed by orjson and the characters of its text fields, or None when Python's json
    must read it (orjson missing or refusing it, or a float that may have been a large integer)."""
    if orjson is None:
        return None
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        chars, big = _walk(value)
        return None if big else (value, 0)
    chars = 0
    for key, item in value.items():
        n, big = _walk(item)
        if big:
            return None
        if key in TEXT_FIELDS:
            chars += n
    return value, chars


def _walk(value: Any) -> tuple[int, bool]:
    """The characters of every string in ``value`` (object keys excluded), and whether it holds a
    float of magnitude ``>= 2**63`` (or one that is not finite)."""
    total, stack = 0, [value]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str:
            total += len(item)
        elif kind is dict:
            for v in item.values():
                k = type(v)
                if k is str:
                    total += len(v)
                elif k is float:
                    if not -_BIG < v < _BIG:
                        return total, True
                elif k is dict or k is list:
                    push(v)
        elif kind is list:
            extend(item)
        elif kind is float and not -_BIG < item < _BIG:
            return total, True
    return total, False


def write(value: Any, *, fast: bool) -> bytes:
    """``value`` as compact UTF-8 JSON: by orjson when ``fast`` (the body was read by :func:`read`)
    and it can write it exactly, else by Python's json (``allow_nan=False``: a non-finite number
    is an error, not a reply no JSON parser reads)."""
    if fast and orjson is not None:
        try:
            return orjson.dumps(value)
        except TypeError:  # an integer past 64 bits, a lone surrogate, a key that is not a string
            pass
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
