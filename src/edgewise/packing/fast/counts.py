"""Count memos: one pack counts each distinct text once, and a process counts its fixed texts once.

A pack counts the same blocks several times (fitting, re-rendering after a pass over the budget,
the debug record). :class:`PackCounts` keeps one pack's counts, and with an exact encoding
(:class:`~edgewise.tokens.tokenizers.ExactCounts`) controls what the pack adds to the tokenizer's
shared cache; :meth:`PackCounts.count_stable` keeps the counts of system texts (the same for every pack with
the same fixed layers) for the life of the process; :func:`remembered_overhead` keeps what a
layout's section headers and joins add, per layout, layers and tokenizer. None of them changes a
count: ``tests/packing/test_pack_memos.py`` holds each to a fresh count.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from ...tokens.cache import line_break_tail, split_is_clean
from ...tokens.tokenizers import Bounded, ExactCounts, Tokenizer


def pinned(tok: Tokenizer) -> Tokenizer:
    """The tokenizer a pack counts with from start to end: an exact encoding's view that keeps its
    counter whatever another thread switches meanwhile (see ``TiktokenTokenizer.pinned``)."""
    return tok.pinned() if isinstance(tok, ExactCounts) else tok  # type: ignore[return-value]


class PackCounts:
    """One pack's view of a tokenizer: each distinct text is counted once per pack, whatever the
    shared cache holds, and the pack adds at most half the shared cache's capacity to it.

    A pack counts the same blocks several times (fitting, re-rendering, the debug record); this
    memo serves those repeats, so the shared cache is only for what other packs will reuse, and one
    pack whose input is larger than the cache cannot evict everything else (or, scanning in order,
    evict exactly what it needs next): past its share, its misses are counted and not cached.
    """

    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok = pinned(tok)
        self.name, self.estimated = tok.name, tok.estimated
        exact = isinstance(tok, ExactCounts)
        self._admits = exact
        self._room = tok.cache.max_chars // 2 if exact else 0  # type: ignore[attr-defined]
        self._memo: dict[str, int] = {}
        self.split_proven = exact and tok.split_proven  # type: ignore[attr-defined]
        # the tokenizer's own bound, called directly (select.fit asks it once per chunk it skips)
        self.lower_bound = bound_of(tok)
        # a text this pack counts once and no other pack will (a chunk's id tag): not kept in this
        # pack's memo, nor in the shared cache where the tokenizer can help it
        self.count_once = tok.count_once if exact else tok.count  # type: ignore[attr-defined]
        # a short part of a block that other packs count too (a title's attribute, the tags' tail):
        # the shared cache only, without this pack's memo and its search for the same text with
        # other trailing line breaks (a scan of 20,000 chunks prices thousands of titles)
        self.count_part = tok.count

    def count(self, text: str) -> int:
        n = self._memo.get(text)
        if n is None:
            n = self._other_breaks(text) if self.split_proven else None
            if n is None:
                n = self._encoded(text)
            self._memo[text] = n
        return n

    def count_stable(self, text: str) -> int:
        """The count of a prompt's stable part (its system text: layout constants and the caller's
        system, profile and instructions, never a chunk or the query), kept per tokenizer for the
        life of the process apart from the count cache: every pack with the same fixed layers
        renders the same system text. Only for the exact encodings, whose name fixes the vocabulary
        (another tokenizer's name, a plugin's say, need not)."""
        if not self.split_proven:
            return self.count(text)
        key = (self.name, text)
        n = _STABLE.get(key)
        if n is None:
            n = self.count(text)
            if len(text) <= STABLE_MAX_CHARS:
                if len(_STABLE) >= STABLE_MAX_TEXTS:
                    _STABLE.clear()
                _STABLE[key] = n
        return n

    def _encoded(self, text: str) -> int:
        if not self._admits:
            return self.tok.count(text)
        admit = self._room >= len(text)
        if admit:
            self._room -= len(text)
        return self.tok.count(text, admit=admit)  # type: ignore[call-arg] - our own tokenizers take it

    def _other_breaks(self, text: str) -> int | None:
        """``text``'s count from this pack's count of the same text with another number of trailing
        line breaks, when the identity of :func:`edgewise.tokens.cache.line_break_tail` applies; else
        None. Tried for texts with none or two (a system text, a section's last block): a block is
        first counted with one."""
        if text.endswith("\n") and not text.endswith("\n\n"):
            return None
        found = line_break_tail(text)
        if found is None:
            return None
        stem, mark = found
        breaks = len(text) - len(stem)
        memo = self._memo
        for j in (0, 1, 2):
            if j != breaks and (n := memo.get(stem + "\n" * j)) is not None:
                return n - self.count(mark + "\n" * j) + self.count(mark + "\n" * breaks)
        return None

    def count_parts(self, parts: Sequence[str]) -> int:
        if self.split_proven and all(split_is_clean(a, b) for a, b in zip(parts, parts[1:])):
            return sum(self.count(p) for p in parts)
        return self.count("".join(parts))

    def truncate(self, text: str, max_tokens: int) -> str:
        return self.tok.truncate(text, max_tokens)

    def count_prefix(self, text: str, n_chars: int) -> int:
        """Tokens of ``text[:n_chars]`` (the prompt's cacheable prefix, its stable part), from the
        stable counts when the split there is clean."""
        head = text[:n_chars]
        if self.split_proven and 0 < n_chars < len(text) and split_is_clean(head, text[n_chars:n_chars + 1]):
            return self.count_stable(head)
        return self.tok.count_prefix(text, n_chars)


# counts of system texts (PackCounts.count_stable): a few distinct ones per process, bounded anyway
STABLE_MAX_TEXTS, STABLE_MAX_CHARS = 64, 32_000
_STABLE: dict[tuple[str, str], int] = {}


def bound_of(tok: object) -> Callable[[str, int], int]:
    """``tok``'s provable lower bound on a text's token count (``lower_bound(text, stop)``, see
    :func:`edgewise.tokens.wordbound.words_bound`), or 0 for a tokenizer that has none."""
    return tok.lower_bound if isinstance(tok, Bounded) else _no_bound


def _no_bound(text: str, stop: int) -> int:
    return 0


_OVERHEADS: dict[Hashable, int] = {}


def remembered_overhead(key: Hashable, measure: Callable[[], int]) -> int:
    """What a layout's headers and joins add to the blocks, measured once per ``key`` (layout name,
    layers but the query, tokenizer, key facts): with an exact encoding whose pieces are counted
    apart, it does not depend on the query."""
    found = _OVERHEADS.get(key)
    if found is None:
        found = measure()
        if len(_OVERHEADS) >= 256:
            _OVERHEADS.clear()
        _OVERHEADS[key] = found
    return found
