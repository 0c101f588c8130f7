"""A deadline for model work, checked between inference batches: work past it stops there.

Whoever runs work under a time limit sets the deadline (:func:`until`; ``edgewise serve`` does,
per request, in the worker thread that runs it) and the model loops check it before each batch
(:func:`check`: the ONNX runner behind ``dense`` and the sentence model, the cross-encoder). Past
it they raise :class:`Cancelled`, so the thread is free again within one batch (milliseconds for
MiniLM) instead of running the rest of the texts for a reply no one waits for. Without a deadline
(the library, the CLI) nothing is checked.

The deadline is a :mod:`contextvars` value of the thread that set it: a loop that hands batches to
threads of its own reads it first (:func:`current`) and passes it to :func:`check`.

>>> import time
>>> with until(time.monotonic() - 1):
...     check()
Traceback (most recent call last):
...
edgewise.score.deadline.Cancelled: the work's deadline passed: stopped between two model batches
>>> check(), current()  # no deadline set: nothing to check
(None, None)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_DEADLINE: ContextVar[float | None] = ContextVar("edgewise_deadline", default=None)


class Cancelled(TimeoutError):
    """The work's deadline passed: its model loop stopped between two batches."""


def current() -> float | None:
    """The deadline set in this context (a :func:`time.monotonic` time), or None."""
    return _DEADLINE.get()


@contextmanager
def until(deadline: float | None) -> Iterator[None]:
    """Run the block under ``deadline`` (a :func:`time.monotonic` time; None: none)."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check(deadline: float | None = None) -> None:
    """Raise :class:`Cancelled` when ``deadline`` (default: this context's) has passed."""
    at = deadline if deadline is not None else _DEADLINE.get()
    if at is not None and time.monotonic() >= at:
        raise Cancelled("the work's deadline passed: stopped between two model batches")
