"""HTTP request bodies read at once: orjson where it reads what Python's json would, and the path of
a string no UTF-8 can carry.

A 200-chunk ``/v1/pack`` reads a ~150 KB body; Python's json takes about as long for it as the pack
itself, orjson (where installed: the ``serve`` extra) about a tenth of that. orjson is used only
where the values are the same either way: it refuses ``NaN``/``Infinity``, numbers too large for a
float and lone surrogates (Python's json takes them all; the endpoints then refuse them with their
own messages), so a body orjson refuses is read again by Python's json, and it is that parse whose
error or value counts. One difference would be silent: orjson reads an integer beyond 64 bits as a
float (``-9223372036854775809`` as ``-9.223372036854776e+18``). A body whose parse holds a float of
magnitude ``>= 2**63`` is therefore read again by Python's json too (it may have been such an
integer), so a request's values never depend on which parser read them.

The walk that looks for those floats also counts the characters of the text fields (what the
``--max-chars`` limit and the ``edgewise_input_characters_total`` metric take), so the body is
walked once. What the server answers for a body it refuses (its status and error type) is the
server's: this module reads, the server's routes refuse.

>>> read(b'{"query": "abc", "chunks": ["de", {"text": "f"}], "options": {"budget": 9}}')
({'query': 'abc', 'chunks': ['de', {'text': 'f'}], 'options': {'budget': 9}}, 6)
>>> read(b'{"options": {"budget": -9223372036854775809}}') is None  # Python's json reads it
True
>>> lone_surrogate_at({"messages": [{"content": "ok\\ud800"}]})
('messages[0].content', 2, '\\ud800')
"""

from __future__ import annotations

from typing import Any

from .strict import UNREAD, lone_surrogate, quick

TEXT_FIELDS = ("query", "chunks", "text", "options")  # what --max-chars counts: strings in these fields
_BIG = 2.0 ** 63  # orjson reads an integer past 64 bits as a float at least this large


def available() -> bool:
    """Whether orjson is installed (else :func:`read` always returns None).

    >>> available() in (True, False)
    True
    """
    return quick(b"0", 0) is not UNREAD  # orjson reads "0" wherever it is installed


def read(body: bytes) -> tuple[Any, int] | None:
    """``body`` parsed by orjson and the characters of its text fields, or None when Python's json
    must read it (orjson missing or refusing it, or a float that may have been a large integer)."""
    value = quick(body, 0)
    if value is UNREAD:
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


def lone_surrogate_at(value: Any, root: str = "the body") -> tuple[str, int, str] | None:
    """``(path, index, character)`` of the first string (key or value) of ``value``, a parsed body,
    holding a lone surrogate, or None; paths below the body's top level are named without it
    (``messages[0].content``), a key as ``a key of`` its object's path."""
    stack: list[tuple[str, Any]] = [(root, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            at = lone_surrogate(item)
            if at is not None:
                return path, at, item[at]
        elif isinstance(item, dict):
            for key, sub in reversed(item.items()):
                at = lone_surrogate(key)
                if at is not None:
                    return f"a key of {path}", at, key[at]
                stack.append((f"{path}.{key}" if path != "the body" else key, sub))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", sub) for i, sub in reversed(list(enumerate(item))))
    return None
