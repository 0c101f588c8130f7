"""The one place parameter values are validated. Each check states the rule and the value.

>>> check_int("top_k", 0, minimum=1)
Traceback (most recent call last):
...
edgewise.errors.InputError: top_k must be > 0, but got 0
>>> check_number("prune", 1.5, low=0, high=1, what="a threshold in [0, 1]")
Traceback (most recent call last):
...
edgewise.errors.InputError: prune must be a threshold in [0, 1], but got 1.5
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .errors import InputError


def _bound(minimum: int) -> str:
    return "> 0" if minimum == 1 else f">= {minimum}"


def check_int(
    name: str, value: Any, *, minimum: int | None = None, optional: bool = False, error: type[Exception] = InputError,
) -> int | None:
    """An integer (never a bool), at least ``minimum``; ``None`` passes when ``optional``."""
    if value is None and optional:
        return None
    bound = "" if minimum is None else " " + _bound(minimum)
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{name} must be an integer{bound}, but got {value!r}")
    if minimum is not None and value < minimum:
        raise error(f"{name} must be{bound}, but got {value}")
    return value


def check_number(
    name: str, value: Any, *, low: float | None = None, high: float | None = None, above: float | None = None,
    optional: bool = False, what: str | None = None, error: type[Exception] = InputError,
) -> float | None:
    """A finite real number (never a bool) in ``[low, high]`` and ``> above`` where given."""
    if value is None and optional:
        return None
    if what is None:
        parts = [f">= {low}"] if low is not None else []
        parts += [f"<= {high}"] if high is not None else []
        parts += [f"> {above:g}"] if above is not None else []
        what = "a finite number" + (" " + " and ".join(parts) if parts else "")
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    if ok:
        try:
            ok = math.isfinite(value)
        except OverflowError:  # an int too large for a float
            ok = False
    if not ok:
        raise error(f"{name} must be {what}, but got {value!r}")
    if above is not None and not value > above:
        raise error(f"{name} must be > {above:g}, but got {value}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise error(f"{name} must be {what}, but got {value}")
    return value


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"{name} must be true or false, but got {value!r}")
    return value


def check_str(name: str, value: Any, *, optional: bool = False, choices: Sequence[str] | None = None) -> str | None:
    """A string (one of ``choices`` when given); ``None`` passes when ``optional``."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string, but got {type(value).__name__}")
    if choices is not None and value not in choices:
        listed = " or ".join(repr(c) for c in choices) if len(choices) <= 2 else "one of " + ", ".join(choices)
        raise InputError(f"{name} must be {listed}, but got {value!r}")
    return value
