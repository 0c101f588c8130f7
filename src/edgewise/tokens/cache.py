"""Token counts by content, shared by a tokenizer's users, bounded in memory; and when counts add up.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable


class CountCache:
    """Counts by content, so each distinct text is encoded once; least recently used texts are
    evicted once the cached texts exceed ``max_chars`` in total, which bounds the memory.

    Safe to share between threads: a lock guards every change to the table, and counting runs
    outside it, so threads encode in parallel (two threads that miss on the same text both count
    it, and the second result is not added twice); a hit reads without the lock.
    """

    def __init__(self, max_chars: int = 8_000_000) -> None:
        self._data: OrderedDict[str, int] = OrderedDict()
        self._max_chars = max_chars
        self._chars = 0
        self._lock = threading.Lock()
        self._hits: dict[int, int] = {}  # per thread: each thread writes only its own entry
        self.misses = 0

    @property
    def hits(self) -> int:
        return sum(self._hits.copy().values())

    @property
    def max_chars(self) -> int:
        return self._max_chars

    def get(self, text: str, compute: Callable[[str], int], admit: bool = True) -> int:
        # a hit takes no lock: dict and OrderedDict operations are atomic, and a text evicted by
        # another thread between the lookup and the move is simply not moved
        data = self._data
        value = data.get(text)
        if value is not None:
            tid = threading.get_ident()
            self._hits[tid] = self._hits.get(tid, 0) + 1
            try:
                data.move_to_end(text)
            except KeyError:
                pass
            return value
        value = compute(text)
        with self._lock:  # once a miss: its tally and its entry
            self.misses += 1
            if admit and len(text) <= self._max_chars >> 2 and text not in data:
                data[text] = value
                self._chars += len(text)
                while self._chars > self._max_chars:
                    old, _ = data.popitem(last=False)
                    self._chars -= len(old)
        return value

    def stats(self) -> dict[str, int]:
        """Hits, misses, and the texts and characters held now."""
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "texts": len(self._data), "chars": self._chars}

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._chars = 0


def split_is_clean(head: str, tail: str) -> bool:
    """True when no pre-token of cl100k/o200k can span the join of ``head`` and ``tail``.

    Both encodings end every pre-token that holds a line break at the last break of a run
    (``\\s*[\\r\\n]``, ``[^\\s\\p{L}\\p{N}]+[\\r\\n]*``; o200k also takes a ``/``), and no
    pattern starts with a line break followed by something else, so after a line break a
    non-space character other than ``/`` always starts a new pre-token, and BPE never merges across
    pre-tokens: the counts add up.
    """
    return head.endswith("\n") and bool(tail) and not tail[0].isspace() and tail[0] != "/"


def token_head(text: str, n_tokens: int, chars_per_token: int = 8) -> str:
    """A prefix of ``text`` whose cl100k/o200k tokens are the first tokens of ``text``'s, long enough
    that prose has more than ``n_tokens`` in it; ``text`` itself when it is not much longer.

    The prefix ends before a space that follows a non-space character: no pre-token of either
    pattern runs across that point (a letter, digit or punctuation run stops at a space, which only
    the patterns that start with whitespace take, and a run's trailing ``[\\r\\n]`` or ``/`` is not a
    space), and the pre-tokens before it do not depend on what follows. BPE never merges across
    pre-tokens, so encoding the prefix gives the text's first tokens, up to that point. A caller
    that finds ``n_tokens`` or fewer in it encodes the whole text.
    """
    at = chars_per_token * (n_tokens + 1)
    if len(text) <= 2 * at:
        return text
    at = text.find(" ", at)
    while at > 0 and text[at - 1].isspace():
        at = text.find(" ", at + 1)
    return text[:at] if at > 0 else text


_ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
# ASCII punctuation that no pattern of cl100k/o200k joins to a following line break other than as
# ``[^\s\p{L}\p{N}]+[\r\n]*`` (the apostrophe starts contractions; o200k lets ``/`` follow a break)
_PUNCT = frozenset("!\"#$%&()*+,-.:;<=>?@[\\]^_`{|}~")


def line_break_tail(text: str) -> tuple[str, str] | None:
    """Where a count can be had from the same text with another number of trailing line breaks.

    For ``text = X + c + "\\n" * k`` where ``X`` ends with an ASCII letter or digit and ``c`` is one
    ASCII punctuation character, cl100k and o200k make ``c`` and the line breaks one pre-token of
    their own (``[^\\s\\p{L}\\p{N}]+[\\r\\n]*``: the run cannot start earlier, after a letter or
    digit, nor take more than the breaks), and every pre-token before it is the same whatever the
    number of breaks. BPE never merges across pre-tokens, so for any ``j``, ``k``:

        count(X + c + "\\n" * k) == count(X + c + "\\n" * j) - count(c + "\\n" * j) + count(c + "\\n" * k)

    which lets a block counted with one line break give its count with two (a section's last block),
    and a system text give its count when the prompt adds a blank line, without encoding either
    again. Returns ``(X + c, c)``: the text without its line breaks and the punctuation character.
    ``tests/tokens/test_lower_bound.py`` checks the identity against the exact counts.
    """
    stem = text.rstrip("\n")
    if len(stem) < 2 or stem[-1] not in _PUNCT or stem[-2] not in _ASCII_ALNUM:
        return None
    return stem, stem[-1]
