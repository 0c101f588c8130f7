"""A provable lower bound on cl100k/o200k token counts that costs a split, not an encode.

:func:`edgewise.packing.select.fit` drops a chunk without encoding it when its bound already exceeds the
tokens left, so a budget that fills early never pays for the chunks that cannot fit.

>>> words_bound("four words right here", 100), words_bound("four words right here", 2)
(4, 3)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from .. import compiled

# The split patterns of the exact encodings (tiktoken's own strings), each with the junctions
# where one of its pre-tokens can hold two whitespace-separated words: o200k's
# `` ?[^\s\p{L}\p{N}]+[\r\n/]*`` runs on past a line break into a ``/``.
CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
                   r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""", r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""", r"""\s*[\r\n]+""", r"""\s+(?!\S)""", r"""\s+""",
])
O200K_BRIDGES = ("\n/", "\r/")
BRIDGES_BY_NAME: dict[str, tuple[str, ...]] = {"cl100k_base": (), "o200k_base": O200K_BRIDGES}
_NOT_WHITE_SPACE = ("\x1c", "\x1d", "\x1e", "\x1f")  # str.split() splits on them; the patterns' \s does not


def words_bound(text: str, stop: int, bridges: tuple[str, ...] = ()) -> int:
    r"""At most the number of tokens cl100k/o200k give ``text``: its whitespace-separated words.

    Why it holds: BPE turns every pre-token (a match of the encoding's split pattern) into at least
    one token, and no pre-token of either pattern holds two words (two runs of non-``\s``
    characters), except o200k's punctuation runs, which go on past a line break into a ``/``: each
    such junction (``bridges``) can join two words, so it is taken off. ``str.split`` also splits on
    the four separators ``\x1c``-``\x1f``, which ``\s`` does not match: each can split one word
    in two, so they are taken off too. Counting stops once the bound passes ``stop`` (the result
    is then ``stop + 1``), so a long text costs what its first ``stop`` words cost.
    ``tests/tokens/test_lower_bound.py`` checks it against the exact count over the bundled corpus and
    generated text.

    >>> words_bound("four words right here", 100), words_bound("four words right here", 2)
    (4, 3)
    """
    # substring tests, a fast scan each, written out: this runs once per chunk a pack skips
    if "\x1c" in text or "\x1d" in text or "\x1e" in text or "\x1f" in text or (
            bridges and any(b in text for b in bridges)):
        fix = sum(text.count(c) for c in _NOT_WHITE_SPACE + bridges)
        return max(0, len(text.split(None, max(stop, 0) + fix)) - fix)
    return len(text.split(None, stop if stop > 0 else 0))


class WordBound:
    """:func:`words_bound` for one encoding's junctions (``()`` for cl100k, :data:`O200K_BRIDGES`),
    as a tokenizer's ``lower_bound``, with ``scan``, the same bound over many texts at once.

    ``scan(texts, order, start, stop, limit)``: from rank ``start`` of ``order`` (positions in
    ``texts``, best first; None: ``texts`` in order), the first rank whose text has ``limit``
    characters or fewer, or a bound of ``stop`` or less; ``len(order)`` if none. It knows texts
    only: why a caller skips the texts it passes over is the caller's (:mod:`edgewise.packing.select`). It
    runs in C where ``edgewise._scan`` is built (:data:`SCANNER` says), else in Python.

    >>> bound = WordBound()
    >>> bound("four words right here", 2), bound.scan(["a b c d", "a b", "a b c"], [2, 0, 1], 0, 2, 0)
    (3, 2)
    """

    __slots__ = ("bridges", "scan")

    def __init__(self, bridges: tuple[str, ...] = ()) -> None:
        if bridges not in ((), O200K_BRIDGES):  # the scan in C knows these two only
            raise ValueError(f"a word bound's bridges must be () or {O200K_BRIDGES!r}, not {bridges!r}")
        self.bridges = bridges
        self.scan: Callable[..., int] = partial(scan_words, bridges != ())

    def __call__(self, text: str, stop: int) -> int:
        return words_bound(text, stop, self.bridges)


def scan_words_py(bridged: bool, texts: list[str], order: list[int] | None, start: int, stop: int,
                  limit: int) -> int:
    """``WordBound.scan`` in Python: what ``edgewise._scan.scan_words`` does in C (a test holds the
    two to the same answers), for an install where it could not be compiled."""
    bound = partial(words_bound, bridges=O200K_BRIDGES) if bridged else words_bound
    n, start = len(texts) if order is None else len(order), max(start, 0)
    # the texts from `start` on, read by iterators in C (no copy: a scan is entered again and again)
    ranks = range(start, n)
    column = map(texts.__getitem__, ranks if order is None else map(order.__getitem__, ranks))
    for rank, text in enumerate(column, start):
        if len(text) <= limit or bound(text, stop) <= stop:
            return rank
    return n


scan_words: Callable[..., int] = compiled.module.scan_words if compiled.module is not None else scan_words_py
SCANNER = compiled.STATUS
"""What runs ``WordBound.scan``: ``C``, or ``Python (why)``."""
