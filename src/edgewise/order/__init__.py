"""Placement strategies: where each selected chunk goes in the prompt.

Each strategy is one decorated function that takes the number of chunks ``n`` (ranked best first)
and a :class:`PlaceContext`, and returns the ranks in prompt order. :func:`reorder` applies one to
any list, so it also works as a plain drop-in for LongContextReorder-style code.

>>> reorder([1, 2, 3, 4, 5, 6, 7, 8, 9], "edges")
[1, 3, 5, 7, 9, 8, 6, 4, 2]
>>> reorder([1, 2, 3, 4], "edges-mirror")
[2, 4, 3, 1]
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import ConfigError, InputError
from ..files.cache import load_cached
from ..registry import Registry

T = TypeVar("T")


@dataclass(frozen=True)
class PlaceContext:
    """What a strategy may need besides ``n``.

    ``input_order``: the ranks sorted by input position (for ``original`` and ``position``);
    ``key``: the rank of the key chunk (for ``position``); ``arg``: the text after ``name:``.
    """

    input_order: tuple[int, ...] = ()
    key: int | None = None
    arg: str | None = None


Strategy = Callable[[int, PlaceContext], list[int]]
ORDERS: Registry[Strategy] = Registry("orders")  # plugins: entry-point group "edgewise.orders"


def register_order(name: str, fn: Strategy | None = None, *, arg: str | None = None) -> Any:
    """Register a placement strategy under ``name``; usable as a decorator.

    The strategy gets ``n`` and a :class:`PlaceContext` and returns the ranks ``0..n-1`` (0 = best)
    in prompt order. ``arg`` names the argument it requires after ``name:`` (``ctx.arg``); without
    it the order takes none. A name already taken raises ConfigError.

    >>> @register_order("best-last-but-one")
    ... def best_last_but_one(n, ctx):
    ...     return list(range(1, n)) + [0] if n > 1 else [0]
    >>> reorder(["a", "b", "c"], "best-last-but-one")
    ['b', 'c', 'a']
    >>> ORDERS.unregister("best-last-but-one")
    """
    return ORDERS.register(name, fn, arg=arg)


def order_names() -> list[str]:
    """Registered strategy names, with the argument the parameterised ones take."""
    return ORDERS.display_names()


@register_order("edges")
def edges(n: int, ctx: PlaceContext) -> list[int]:
    """Best first, second best last, alternating inwards (Haystack's LostInTheMiddleRanker)."""
    return list(range(0, n, 2)) + list(range(n - 1 - (n % 2 == 1), 0, -2))


@register_order("auto")
def auto(n: int, ctx: PlaceContext) -> list[int]:
    """The measured profile of the model packed for (``pack(..., model=NAME)``; see
    :mod:`edgewise.order.profiles`), else ``edges``. Without a model, as here, it is ``edges``."""
    return edges(n, ctx)


@register_order("edges-mirror")
def edges_mirror(n: int, ctx: PlaceContext) -> list[int]:
    """LangChain's / LlamaIndex's LongContextReorder: ``edges`` for odd n, its mirror for even n."""
    placed = edges(n, ctx)
    return placed if n % 2 else placed[::-1]


@register_order("relevance")
def relevance(n: int, ctx: PlaceContext) -> list[int]:
    """Best first."""
    return list(range(n))


@register_order("reverse")
def reverse(n: int, ctx: PlaceContext) -> list[int]:
    """Best last, next to the question."""
    return list(range(n - 1, -1, -1))


@register_order("original")
def original(n: int, ctx: PlaceContext) -> list[int]:
    """Input order, whatever the scores."""
    return list(ctx.input_order) if ctx.input_order else list(range(n))


@register_order("middle-boost")
def middle_boost(n: int, ctx: PlaceContext) -> list[int]:
    """Best in the middle, worst at the edges: for testing a model against the effect."""
    return [n - 1 - r for r in edges(n, ctx)]


@register_order("position", arg="K|first|middle|last")
def position(n: int, ctx: PlaceContext) -> list[int]:
    """The key chunk at index K (or first/middle/last); the rest keep their input order."""
    if ctx.key is None:
        raise InputError("order 'position' needs the key chunk: pass key_id (CLI: --key-id ID)")
    k = slot_index(ctx.arg, n)
    rest = [r for r in (ctx.input_order or range(n)) if r != ctx.key]
    return rest[:k] + [ctx.key] + rest[k:]


def slot_index(arg: str | None, n: int) -> int:
    """``first``/``middle``/``last`` or an integer K, checked against ``n`` slots."""
    named = {"first": 0, "middle": (n - 1) // 2, "last": n - 1}
    if arg in named:
        return max(0, named[arg])
    try:
        k = int(arg or "")
    except ValueError:
        raise InputError(f"position must be first, middle, last or an integer, but got {arg!r}") from None
    if not 0 <= k < max(n, 1):
        raise InputError(f"position must be in 0..{n - 1} for {n} chunks, but got {k}")
    return k


@register_order("calibrated", arg="PROFILE.json")
def calibrated(n: int, ctx: PlaceContext) -> list[int]:
    """Chunks by descending score into slots by descending measured accuracy.

    The profile is a JSON list of accuracies at evenly spaced relative positions (0 = first,
    1 = last), or an object with such a list under ``accuracy``; slots between measured points
    are interpolated linearly, and ties go to the earlier slot.
    """
    curve = load_profile(ctx.arg)
    slot_acc = [_interpolate(curve, i / (n - 1) if n > 1 else 0.0) for i in range(n)]
    slots_by_acc = sorted(range(n), key=lambda i: (-slot_acc[i], i))
    placed = [0] * n
    for rank, slot in enumerate(slots_by_acc):
        placed[slot] = rank
    return placed


def _interpolate(curve: list[float], x: float) -> float:
    if len(curve) == 1:
        return curve[0]
    pos = x * (len(curve) - 1)
    lo = min(int(math.floor(pos)), len(curve) - 2)
    frac = pos - lo
    return curve[lo] * (1 - frac) + curve[lo + 1] * frac


def load_profile(path: str | None) -> list[float]:
    """Read a position-accuracy profile file; errors name the file and what was wrong."""
    if not path:
        raise ConfigError("order 'calibrated' needs a profile file: calibrated:PROFILE.json")
    try:
        return list(load_cached(path, _parse_profile, what="profile file"))
    except _ProfileError as exc:
        raise ConfigError(f"profile file {path!r} {exc}") from None


class _ProfileError(ValueError):
    """What is wrong with a profile's text; :func:`load_profile` adds the file name."""


def _parse_profile(text: str) -> tuple[float, ...]:
    """The accuracies in a profile file's text (parsed once per file version, see ``files``)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _ProfileError(f"line {exc.lineno}: invalid JSON ({exc.msg})") from None
    except RecursionError:
        raise _ProfileError("must be a JSON list of numbers, but it is nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise _ProfileError(f"is not valid JSON ({exc})") from None
    if isinstance(data, dict):
        data = data.get("accuracy")
    if (
        not isinstance(data, list)
        or not data
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in data)
    ):
        raise _ProfileError(
            "must be a non-empty JSON list of numbers "
            f"(accuracy per relative position), but got {json.dumps(data)[:80]}"
        )
    return tuple(float(v) for v in data)


def resolve(spec: str) -> tuple[Strategy, str | None]:
    """Split ``name[:arg]`` and look the strategy up, failing with the list of known names."""
    return ORDERS.lookup(spec, strict=True)


def place(spec: str, n: int, *, input_order: Sequence[int] = (), key: int | None = None) -> list[int]:
    """Ranks ``0..n-1`` in prompt order under strategy ``spec``; checked to be a permutation."""
    fn, arg = resolve(spec)
    if n == 0:
        return []
    placed = fn(n, PlaceContext(tuple(input_order), key, arg))
    if sorted(placed) != list(range(n)):  # a registered strategy must not lose or repeat chunks
        raise ConfigError(f"order {spec!r} returned {placed}, which is not a permutation of 0..{n - 1}")
    return placed


def reorder(items: Sequence[T], spec: str = "edges") -> list[T]:
    """Apply a strategy to ``items`` given best first (input order = rank order).

    >>> reorder(["a", "b", "c", "d", "e"])
    ['a', 'c', 'e', 'd', 'b']
    """
    return [items[r] for r in place(spec, len(items), input_order=range(len(items)))]
