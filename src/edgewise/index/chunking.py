"""Token-aware chunks with overlap, on sentence boundaries, each an exact span of its document.

Sentences (:func:`edgewise.prune.sentences.split_sentences`) are taken in order into a chunk while the
chunk's exact token count (the target tokenizer's, of the chunk's own text) stays within ``size``;
the next chunk starts with the last sentences of the one before, up to ``overlap`` tokens of them.
A sentence longer than ``size`` is cut at token boundaries into pieces of at most ``size`` tokens.
Every chunk is ``text[start:end]`` (stripped of edge whitespace), so its offsets point into the
document; consecutive chunks cover the whole text.

>>> from edgewise.tokens import get_tokenizer
>>> text = "One two three four. Five six seven eight. Nine ten eleven twelve. Thirteen fourteen."
>>> for p in split_text(text, get_tokenizer("words"), size=12, overlap=6):
...     print(p.start, p.end, p.text)
0 41 One two three four. Five six seven eight.
20 65 Five six seven eight. Nine ten eleven twelve.
42 84 Nine ten eleven twelve. Thirteen fourteen.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..checks import check_int
from ..errors import InputError
from ..prune.sentences import split_sentences
from ..tokens.tokenizers import Tokenizer


@dataclass(frozen=True)
class Piece:
    """A chunk of a document: ``document[start:end] == text``; ``tokens`` in the target tokenizer."""

    start: int
    end: int
    text: str
    tokens: int


def check_sizes(size: int, overlap: int) -> None:
    check_int("chunk_tokens", size, minimum=4)
    check_int("overlap_tokens", overlap, minimum=0)
    if overlap >= size:
        raise InputError(f"overlap_tokens must be smaller than chunk_tokens ({size}), but got {overlap}")


BLOCK_CHARS = 1 << 20  # sentences are split a block of text at a time: work and memory stay linear in the text
_NONSPACE = re.compile(r"\S")


def _sentence_spans(text: str) -> Iterator[tuple[int, int]]:
    """Sentences of ``text`` as (start, end), split at most :data:`BLOCK_CHARS` characters at a time.

    A block ends at its last paragraph break, else its last whitespace, else at the limit; its last
    sentence (which may run on) starts the next block, unless it is the block's only one.
    """
    pos, n = 0, len(text)
    while pos < n:
        end = n
        if n - pos > BLOCK_CHARS:
            limit = pos + BLOCK_CHARS
            end = text.rfind("\n\n", pos + BLOCK_CHARS // 2, limit)
            if end == -1:
                end = max(text.rfind(" ", pos + BLOCK_CHARS // 2, limit), text.rfind("\n", pos + BLOCK_CHARS // 2, limit))
            end = limit if end == -1 else end + 1
        spans = split_sentences(text[pos:end])
        if end < n and len(spans) > 1:
            end = pos + spans.pop().start
        for s in spans:
            yield pos + s.start, pos + s.end
        pos = end


def _cut(text: str, start: int, end: int, tok: Tokenizer, size: int) -> Iterator[tuple[int, int, int]]:
    """``text[start:end]`` (one sentence) cut at token boundaries into pieces of at most ``size`` tokens,
    each cut made in a window a few times the last piece's length (never the whole rest of the text)."""
    width = 8 * (size + 1)
    pos = start
    while pos < end:
        window = text[pos:min(end, pos + width)]
        head = tok.truncate(window, size)
        if len(head) == len(window) and pos + width < end:  # the window holds no more than size tokens
            width *= 2
            continue
        head = head or window[:1]  # one character over the budget (it cannot be at size >= 4, but never loop)
        piece = head.rstrip()
        if piece:
            yield pos, pos + len(piece), tok.count(piece)
        nxt = _NONSPACE.search(text, pos + len(head), end)
        pos = nxt.start() if nxt else end
        width = max(8 * (size + 1), 2 * len(head))


def _units(text: str, tok: Tokenizer, size: int) -> list[tuple[int, int, int]]:
    """Sentences as (start, end, tokens), with any sentence over ``size`` cut into token-bounded pieces."""
    out = []
    for start, end in _sentence_spans(text):
        n = tok.count(text[start:end]) if end - start <= 32 * size else size + 1  # a long one is cut, not counted whole
        if n <= size:
            out.append((start, end, n))
        else:
            out.extend(_cut(text, start, end, tok, size))
    return out


def split_text(text: str, tok: Tokenizer, *, size: int = 256, overlap: int = 32) -> list[Piece]:
    """Chunks of at most ``size`` tokens, consecutive ones sharing up to ``overlap`` tokens of sentences."""
    check_sizes(size, overlap)
    units = _units(text, tok, size)
    pieces: list[Piece] = []
    i = 0
    while i < len(units):
        j, total = i, 0
        while j < len(units) and total + units[j][2] <= size:
            total += units[j][2]
            j += 1
        j = max(j, i + 1)
        while True:  # the sum of sentence counts is an estimate at the joins: hold the exact count to size
            start, end = units[i][0], units[j - 1][1]
            n = tok.count(text[start:end])
            if n <= size or j == i + 1:
                break
            j -= 1
        pieces.append(Piece(start, end, text[start:end], n))
        if j >= len(units):
            break
        back, k = 0, j  # overlap: the last sentences of this chunk, within `overlap` tokens, start the next
        while k - 1 > i and back + units[k - 1][2] <= overlap:
            back += units[k - 1][2]
            k -= 1
        i = k
    return pieces
