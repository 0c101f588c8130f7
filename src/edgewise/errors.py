"""The one exception family edgewise raises.

Every message states the rule that was broken and the value that broke it, so the CLI can print it
as one line and the server can return it as a 4xx body.

>>> raise InputError("top_k must be > 0, but got -1")
Traceback (most recent call last):
...
edgewise.errors.InputError: top_k must be > 0, but got -1
"""

from __future__ import annotations


class EdgewiseError(Exception):
    """Base class of every error edgewise raises on purpose."""


class InputError(EdgewiseError, ValueError):
    """A chunk, a query or a parameter value is malformed."""


class ConfigError(EdgewiseError, ValueError):
    """An unknown strategy, layout, tokenizer, scorer or format name, or a bad profile file."""


class BudgetError(EdgewiseError):
    """The token budget cannot hold the fixed layers (system, profile, question)."""


def unknown(kind: str, name: str, known: list[str] | tuple[str, ...]) -> ConfigError:
    """Build the error for an unknown registry name, listing the valid ones."""
    return ConfigError(f"unknown {kind} {name!r}; choose one of: {', '.join(known)}")
