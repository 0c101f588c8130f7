"""Scorers: relevance of each chunk to the query, when the retriever gave none.

A scorer is anything with ``name`` and ``score(query, texts) -> list[float]`` (higher is more
relevant). The core ships ``bm25`` (lexical, no dependencies); model-based scorers register themselves from extras.

>>> get_scorer("bm25").score("capital of france", ["Paris is the capital of France.", "Bananas."])[1]
0.0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from ..errors import unknown


@runtime_checkable
class Scorer(Protocol):
    """Scores texts against a query; higher is more relevant."""

    name: str

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


SCORERS: dict[str, Callable[[str | None], Scorer]] = {}


def scorer(name: str) -> Callable[[Callable[[str | None], Scorer]], Callable[[str | None], Scorer]]:
    """Register a scorer factory under ``name``; the factory gets the text after ``name:``."""

    def register(factory: Callable[[str | None], Scorer]) -> Callable[[str | None], Scorer]:
        SCORERS[name] = factory
        return factory

    return register


def scorer_names() -> list[str]:
    """``given`` (keep the input scores) and every registered scorer."""
    return ["given", *SCORERS]


def get_scorer(spec: str | Scorer) -> Scorer:
    """A scorer by name (``bm25``...) or a Scorer object passed through.

    ``given`` is not a scorer: :func:`edgewise.pack` handles it by keeping the input scores.
    """
    if not isinstance(spec, str):
        return spec
    name, _, arg = spec.partition(":")
    factory = SCORERS.get(name)
    if factory is None:
        raise unknown("scorer", spec, scorer_names())
    return factory(arg or None)


from . import bm25 as _bm25  # noqa: E402,F401  (registers "bm25")


def _lazy(module: str) -> Callable[[str | None], Scorer]:
    """A factory that imports ``score.<module>`` (and its model libraries) only when first used."""

    def make(arg: str | None) -> Scorer:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{module}"), f"_make_{module}")(arg)

    return make


for _name in ("static", "dense", "hybrid", "cross"):  # the models extra: edgewise[models]
    SCORERS.setdefault(_name, _lazy(_name))
