"""How the proxy reads a request body: strict JSON, or a 400 that names the rule and the value.

The proxy reads the bodies it may pack (``/v1/chat/completions``, ``/v1/responses``) and the
bodies of forwarded paths that may carry the ``edgewise`` field, which must never reach the
upstream. A body it cannot read is never forwarded on a guess: it is refused. The rules:

- the body is UTF-8 JSON (RFC 8259);
- numbers are finite (no ``NaN``, ``Infinity``, ``1e999``) and integers have at most Python's
  ``sys.get_int_max_str_digits()`` digits (4300 by default), so the body re-encodes as it came;
- strings are valid Unicode: no lone surrogate (``"\\ud800"``), which no UTF-8 can carry on.

>>> read_json(b'{"model": "m", "n": 1}')
{'model': 'm', 'n': 1}
>>> read_json(b'{"n": NaN}')
Traceback (most recent call last):
...
edgewise.serve.errors.ApiError: 400: numbers in the body must be finite JSON numbers, but got NaN
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from ..jsonin import lone_surrogate
from .errors import ApiError

FIELD = "edgewise"


def _max_digits() -> int:
    get = getattr(sys, "get_int_max_str_digits", None)  # Python 3.11+; 0 means no limit
    return (get() or 0) if get is not None else 0


class _Refused(ValueError):
    pass


def _integer(literal: str) -> int:
    limit = _max_digits()
    digits = len(literal.lstrip("-"))
    if limit and digits > limit:
        raise _Refused(f"integers in the body may have at most {limit} digits (Python's int_max_str_digits), "
                       f"but one has {digits}")
    return int(literal)


def _real(literal: str) -> float:
    value = float(literal)
    if value in (float("inf"), float("-inf")):
        shown = literal if len(literal) <= 24 else literal[:12] + "..."
        raise _Refused(f"numbers in the body must be finite JSON numbers, but {shown} is beyond a double (±1.8e308)")
    return value


def _constant(literal: str) -> Any:
    raise _Refused(f"numbers in the body must be finite JSON numbers, but got {literal}")


_DECODER = json.JSONDecoder(parse_int=_integer, parse_float=_real, parse_constant=_constant)


def read_json(raw: bytes) -> Any:
    """The body's JSON value, or an :class:`ApiError` (400) naming the rule it breaks and where."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(400, "invalid_json", f"the body must be UTF-8 JSON, but byte {e.start} "
                                            f"(0x{raw[e.start]:02x}) is not UTF-8") from None
    text = text.removeprefix("\ufeff")
    try:
        value = _DECODER.decode(text)
    except _Refused as e:
        raise ApiError(400, "invalid_json", str(e)) from None
    except json.JSONDecodeError as e:
        raise ApiError(400, "invalid_json", f"the body must be valid JSON, but {e.msg} at offset {e.pos}") from None
    except RecursionError:
        raise ApiError(400, "invalid_json", "the body must be JSON nested less deeply: it is too deep to read") from None
    if re.search(r"\\u[dD][89a-fA-F]", text):  # a lone surrogate can only come from such an escape
        where = _lone_surrogate(value)
        if where is not None:
            path, index, char = where
            raise ApiError(400, "invalid_json", f"strings in the body must be valid Unicode, but {path} holds a lone "
                                                f"surrogate (U+{ord(char):04X}) at character {index}")
    return value


def _lone_surrogate(value: Any) -> tuple[str, int, str] | None:
    """``(path, index, character)`` of the first string (key or value) holding a lone surrogate."""
    stack: list[tuple[str, Any]] = [("the body", value)]
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


def may_carry_field(raw: bytes) -> bool:
    """Whether a body could hold the ``edgewise`` key: it names it, or it has ``\\u`` escapes that
    could spell it. Bodies that cannot are forwarded without being parsed."""
    return FIELD.encode() in raw or b"\\u" in raw


def refuse_field(raw: bytes, method: str, path: str) -> None:
    """A 422 when a forwarded body carries the ``edgewise`` field (its documents would go upstream
    unpacked); a 400 when it may carry it but cannot be read."""
    if not may_carry_field(raw):
        return
    value = read_json(raw)
    if isinstance(value, dict) and FIELD in value:
        raise ApiError(422, "invalid_input", f"the {FIELD!r} field is read on POST /v1/chat/completions and "
                                             f"POST /v1/responses only, but this request is {method} {path}, "
                                             f"which the proxy forwards unchanged: remove the field")
