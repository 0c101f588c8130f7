"""edgewise._scan: generic passes in C (src/edgewise/_scan.c), each with its Python twin.

They read texts and parsed JSON and know nothing of selection policy: which chunks are dropped and
why is decided in :mod:`edgewise.packing.select`.
"""

from typing import Any

def scan_words(bridged: bool, texts: list[str], order: list[int] | None, start: int, stop: int, limit: int, /) -> int:
    """From rank ``start`` of ``order`` (positions in ``texts``; None: ``texts`` in order), the first
    rank whose text has at most ``limit`` characters or a word bound of at most ``stop``
    (``edgewise.tokens.wordbound.words_bound``, o200k's bridges if ``bridged``); ``len(order)`` if none.
    Twin: ``edgewise.tokens.wordbound.scan_words_py``."""

def words_over(text: str, stop: int, bridges: bool, /) -> bool:
    """Whether ``edgewise.tokens.wordbound.words_bound(text, stop, bridges)`` passes ``stop``."""

def any_in_ranges(text: str, pages: bytes, table: bytes, /) -> bool:
    """Whether ``text`` holds a code point of ``table`` (sorted (first, last) pairs of native uint32),
    ``pages`` a byte per 256 code points, nonzero where a range touches them. Twin:
    ``edgewise.tokens.counters.has_unequal_py``."""

def within(value: Any, limit: int, bound: float, /) -> bool:
    """Whether no dict or list of ``value`` (exact types) sits ``limit`` levels below it (``value`` is
    level 0) and no float of it has a magnitude of ``bound`` or more. Twin: ``edgewise.jsonin.strict.clean_py``."""
