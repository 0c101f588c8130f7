"""JSON out of the ``/v1`` endpoints: orjson where it writes what Python's json would.

A 200-chunk ``/v1/pack`` writes a ~120 KB reply; Python's json takes about as long for it as the
pack itself, orjson (where installed: the ``serve`` extra) about a tenth of that. Bodies are read by
:mod:`edgewise.jsonin.bodies`; a reply is written by orjson only when its body was read by orjson
(no ``NaN``, ``Infinity`` or lone surrogate came in). orjson refuses what it cannot write exactly (an
integer beyond 64 bits, a lone surrogate, a key that is not a string), and the reply is then written
by Python's json. Numbers are spelled in the shortest form that reads back the same
(``1e-05`` becomes ``0.00001``).

>>> write({"prompt": "caf\\u00e9", "tokens": 3}, fast=True)
b'{"prompt":"caf\\xc3\\xa9","tokens":3}'
"""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # the serve extra brings it; without it every reply goes through Python's json
    orjson = None  # type: ignore[assignment]


def write(value: Any, *, fast: bool) -> bytes:
    """``value`` as compact UTF-8 JSON: by orjson when ``fast`` (the body was read by
    :func:`edgewise.jsonin.bodies.read`) and it can write it exactly, else by Python's json
    (``allow_nan=False``: a non-finite number is an error, not a reply no JSON parser reads)."""
    if fast and orjson is not None:
        try:
            return orjson.dumps(value)
        except TypeError:  # an integer past 64 bits, a lone surrogate, a key that is not a string
            pass
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
