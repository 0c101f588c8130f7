"""Scorers: relevance of each chunk to the query, when the retriever gave none.

A scorer is anything with ``name`` and ``score(query, texts) -> list[float]`` (higher is more
relevant). The core ships ``bm25`` (lexical, no dependencies); model-based scorers register themselves from extras.

>>> get_scorer("bm25").score("capital of france", ["Paris is the capital of France.", "Bananas."])[1]
0.0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError
from ..registry import Registry


@runtime_checkable
class Scorer(Protocol):
    """Scores texts against a query; higher is more relevant."""

    name: str

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


ScorerFactory = Callable[[str | None], Scorer]
SCORERS: Registry[ScorerFactory] = Registry("scorers")  # plugins: entry-point group "edgewise.scorers"


def register_scorer(name: str, factory: ScorerFactory | None = None, *, arg: str | None = None) -> Any:
    """Register a scorer factory under ``name``; usable as a decorator.

    The factory gets the text after ``name:`` (or None) and returns a :class:`Scorer`. A name
    already taken raises ConfigError.

    >>> @register_scorer("length")
    ... class ByLength:
    ...     name = "length"
    ...     def __init__(self, arg): pass
    ...     def score(self, query, texts): return [float(len(t)) for t in texts]
    >>> get_scorer("length").score("q", ["ab", "abcd"])
    [2.0, 4.0]
    >>> SCORERS.unregister("length")
    """
    return SCORERS.register(name, factory, arg=arg)


scorer = register_scorer  # the decorator the built-in scorer modules use


@register_scorer("given")
def _given(arg: str | None) -> Scorer:
    raise ConfigError(
        "scorer 'given' is not a model: it keeps the scores the chunks carry (pass it to pack(), not get_scorer())"
    )


def scorer_names() -> list[str]:
    """``given`` (keep the input scores) and every registered scorer."""
    return SCORERS.display_names()


def get_scorer(spec: str | Scorer) -> Scorer:
    """A scorer by name (``bm25``...) or a Scorer object passed through.

    ``given`` is not a scorer: :func:`edgewise.pack` handles it by keeping the input scores.
    """
    if not isinstance(spec, str):
        return spec
    factory, arg = SCORERS.lookup(spec)
    return factory(arg)


from . import bm25 as _bm25  # noqa: E402,F401  (registers "bm25")

for _name in ("static", "dense", "hybrid", "cross"):  # the models extra, imported on first use
    SCORERS.reserve(_name, f"{__name__}.{_name}")
