"""How the proxy reads a request body: strict JSON, or a 400 that names the rule and the value.

The proxy reads the bodies it may pack (``/v1/chat/completions``, ``/v1/responses``,
``/v1/messages``) and the bodies of forwarded paths that may carry the ``edgewise`` field, which
must never reach the upstream. A body it cannot read is never forwarded on a guess: it is refused. The rules:

- the body is UTF-8 JSON (RFC 8259): no ``NaN`` or ``Infinity``, which are not JSON;
- strings are valid Unicode: no lone surrogate (``"\\ud800"``), which no UTF-8 can carry on;
- the numbers edgewise reads itself, those of the ``edgewise`` field (and of the marked message,
  :func:`read_options`), are finite (no ``1e999``) and integers have at most Python's
  ``sys.get_int_max_str_digits()`` digits (4300 by default).

Every other number is kept as it came (:mod:`edgewise.serve.proxy.rawjson`): a field the proxy does not
change is forwarded with the same number, in the same spelling (``1.10``, ``-0``, ``1e400``, a
5,000-digit integer), however Python would have read it.

>>> read_json(b'{"model": "m", "n": 1}')
{'model': 'm', 'n': 1}
>>> read_json(b'{"n": 1.10, "edgewise": {"budget": 10E1}}')
{'n': 1.10, 'edgewise': {'budget': 100.0}}
>>> read_json(b'{"n": NaN}')
Traceback (most recent call last):
...
edgewise.serve.errors.ApiError: 400: numbers in the body must be finite JSON numbers, but got NaN
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...jsonin.bodies import lone_surrogate_at
from ..errors import ApiError
from .rawjson import RawNumber, has_raw, max_digits, number

FIELD = "edgewise"
MARK = "edgewise_documents"
_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # a lone surrogate can only come from such an escape


class _Refused(ValueError):
    pass


def _constant(literal: str) -> Any:
    raise _Refused(f"numbers in the body must be finite JSON numbers, but got {literal}")


_DECODER = json.JSONDecoder(parse_int=number, parse_float=number, parse_constant=_constant)


def _decode(decoder: json.JSONDecoder, text: str, where: str) -> Any:
    try:
        return decoder.decode(text)
    except _Refused as e:
        raise ApiError(400, "invalid_json", str(e).replace("in the body", f"in {where}")) from None
    except json.JSONDecodeError as e:
        raise ApiError(400, "invalid_json", f"{where} must be valid JSON, but {e.msg} at offset {e.pos}") from None
    except RecursionError:
        raise ApiError(400, "invalid_json", f"{where} must be JSON nested less deeply: it is too deep to read") from None


def read_json(raw: bytes) -> Any:
    """The body's JSON value, or an :class:`ApiError` (400) naming the rule it breaks and where.
    Numbers are kept as they came (:class:`~edgewise.serve.proxy.rawjson.RawNumber` where Python would
    change them), but in the ``edgewise`` field, whose numbers are plain ``int`` and ``float``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(400, "invalid_json", f"the body must be UTF-8 JSON, but byte {e.start} "
                                            f"(0x{raw[e.start]:02x}) is not UTF-8") from None
    text = text.removeprefix("\ufeff")
    value = _decode(_DECODER, text, "the body")
    if _MAYBE_SURROGATE.search(text):
        _refuse_surrogate(value, "the body", "the body")
    if isinstance(value, dict) and FIELD in value:
        value[FIELD] = _plain(value[FIELD], FIELD, "the body")
    return value


def read_options(text: str) -> Any:
    """The JSON content of the message named ``edgewise_documents`` (its documents, or the options
    object), by the rules of the ``edgewise`` field: valid Unicode, finite numbers, integers of at
    most ``int_max_str_digits`` digits; an :class:`ApiError` (400) naming the rule. A content that
    is not JSON at all is a :class:`json.JSONDecodeError` (the caller's message)."""
    where = f"the message named {MARK!r}"
    try:
        value = _DECODER.decode(text)
    except _Refused as e:
        raise ApiError(400, "invalid_json", str(e).replace("in the body", f"in {where}")) from None
    except RecursionError:
        raise ApiError(400, "invalid_json", f"the content of {where} must be JSON nested less deeply: it is too "
                                            "deep to read") from None
    if _MAYBE_SURROGATE.search(text):
        _refuse_surrogate(value, where, "its content")
    return _plain(value, "its content", where)


def _plain(value: Any, root: str, where: str) -> Any:
    """``value`` (a part edgewise reads) with its raw numbers as ``int`` and ``float``; a 400 for a
    number that is not finite or an integer with more digits than ``int()`` reads."""
    if not has_raw(value):
        return value
    limit = max_digits()

    def convert(path: str, item: Any) -> Any:
        if isinstance(item, RawNumber):
            literal = item.literal
            if item.is_integer:
                digits = len(literal.lstrip("-"))
                if limit and digits > limit:
                    raise ApiError(400, "invalid_json", f"integers in {where} may have at most {limit} digits (Python's "
                                                        f"int_max_str_digits), but {path} has {digits}")
                return int(literal)
            real = float(literal)
            if real in (float("inf"), float("-inf")):
                shown = literal if len(literal) <= 24 else literal[:12] + "..."
                raise ApiError(400, "invalid_json", f"numbers in {where} must be finite JSON numbers, but {path} is "
                                                    f"{shown}, beyond a double (±1.8e308)")
            return real
        if isinstance(item, dict):
            return {k: convert(f"{path}.{k}", v) for k, v in item.items()}
        if isinstance(item, list):
            return [convert(f"{path}[{i}]", v) for i, v in enumerate(item)]
        return item

    return convert(root, value)


def _refuse_surrogate(value: Any, where: str, root: str) -> None:
    found = lone_surrogate_at(value, root)
    if found is not None:
        path, index, char = found
        raise ApiError(400, "invalid_json", f"strings in {where} must be valid Unicode, but {path} holds a lone "
                                            f"surrogate (U+{ord(char):04X}) at character {index}")


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
        raise ApiError(422, "invalid_input", f"the {FIELD!r} field is read on POST /v1/chat/completions, "
                                             f"POST /v1/responses and POST /v1/messages only, but this request "
                                             f"is {method} {path}, "
                                             f"which the proxy forwards unchanged: remove the field")
