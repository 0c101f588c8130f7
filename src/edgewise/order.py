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
from typing import TypeVar

from .errors import ConfigError, InputError, unknown

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
ORDERS: dict[str, Strategy] = {}
_NEEDS_ARG = {"position", "calibrated"}


def order(name: str) -> Callable[[Strategy], Strategy]:
    """Register a placement strategy under ``name`` (the CLI lists every registered one)."""

    def register(fn: Strategy) -> Strategy:
        ORDERS[name] = fn
        return fn

    return register


def order_names() -> list[str]:
    """Registered strategy names, with the argument the parameterised ones take."""
    return [f"{n}:{'K|first|middle|last' if n == 'position' else 'PROFILE.json'}" if n in _NEEDS_ARG else n for n in ORDERS]


@order("edges")
def edges(n: int, ctx: PlaceContext) -> list[int]:
    """Best first, second best last, alternating inwards (Haystack's LostInTheMiddleRanker)."""
    return list(range(0, n, 2)) + list(range(n - 1 - (n % 2 == 1), 0, -2))


@order("edges-mirror")
def edges_mirror(n: int, ctx: PlaceContext) -> list[int]:
    """LangChain's / LlamaIndex's LongContextReorder: ``edges`` for odd n, its mirror for even n."""
    placed = edges(n, ctx)
    return placed if n % 2 else placed[::-1]


@order("relevance")
def relevance(n: int, ctx: PlaceContext) -> list[int]:
    """Best first."""
    return list(range(n))


@order("reverse")
def reverse(n: int, ctx: PlaceContext) -> list[int]:
    """Best last, next to the question."""
    return list(range(n - 1, -1, -1))


@order("original")
def original(n: int, ctx: PlaceContext) -> list[int]:
    """Input order, whatever the scores."""
    return list(ctx.input_order) if ctx.input_order else list(range(n))


@order("middle-boost")
def middle_boost(n: int, ctx: PlaceContext) -> list[int]:
    """Best in the middle, worst at the edges: for testing a model against the effect."""
    return [n - 1 - r for r in edges(n, ctx)]


@order("position")
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


@order("calibrated")
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
        data = json.loads(_read(path))
    except OSError as exc:
        raise ConfigError(f"profile file {path!r} could not be read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"profile file {path!r} line {exc.lineno}: invalid JSON ({exc.msg})") from None
    if isinstance(data, dict):
        data = data.get("accuracy")
    if (
        not isinstance(data, list)
        or not data
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in data)
    ):
        raise ConfigError(
            f"profile file {path!r} must be a non-empty JSON list of numbers "
            f"(accuracy per relative position), but got {json.dumps(data)[:80]}"
        )
    return [float(v) for v in data]


def resolve(spec: str) -> tuple[Strategy, str | None]:
    """Split ``name[:arg]`` and look the strategy up, failing with the list of known names."""
    name, _, arg = spec.partition(":")
    fn = ORDERS.get(name)
    if fn is None:
        raise unknown("order", spec, order_names())
    if name in _NEEDS_ARG and not arg:
        raise ConfigError(f"order {name!r} needs an argument: {name}:{'K' if name == 'position' else 'PROFILE.json'}")
    if name not in _NEEDS_ARG and arg:
        raise ConfigError(f"order {name!r} takes no argument, but got {spec!r}")
    return fn, arg or None


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


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()
