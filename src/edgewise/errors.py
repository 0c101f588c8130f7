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


class BackendError(EdgewiseError):
    """An LLM backend could not be reached or refused the request (after retries)."""


def unknown(kind: str, name: str, known: list[str] | tuple[str, ...]) -> ConfigError:
    """Build the error for an unknown registry name, listing the valid ones."""
    return ConfigError(f"unknown {kind} {name!r}; choose one of: {', '.join(known)}")


def install_hint(extra: str | None = None) -> str:
    """How to install edgewise (with an extra) from a checkout, until it is published on PyPI.

    >>> install_hint("models")
    "pip install -e '.[models]' (in an edgewise checkout)"
    """
    return f"pip install -e '.[{extra}]' (in an edgewise checkout)" if extra else "pip install -e . (in an edgewise checkout)"


def missing_extra(what: str, package: str, extra: str | None) -> ImportError:
    """The error for an optional dependency that is not installed, with the command that installs it.

    >>> str(missing_extra("cross-encoder reranking", "onnxruntime", "models"))
    "cross-encoder reranking needs onnxruntime: pip install -e '.[models]' (in an edgewise checkout)"
    """
    return ImportError(f"{what} needs {package}: {install_hint(extra)}")
