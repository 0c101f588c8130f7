"""Sentences of a text as exact spans: ``text[span.start:span.end] == span.text`` for every span.

Splitting uses blingfire when it is installed (extra ``models``) and a built-in regex otherwise
(``splitter="auto"``); either can be asked for by name. The regex knows common abbreviations and
initials (``Dr.``, ``J. K.``, ``U.S.``), blank lines and list items.

>>> spans = split_sentences("Paris is the capital. It is in France!  Lyon is not.")
>>> [(s.start, s.end, s.text) for s in spans]
[(0, 21, 'Paris is the capital.'), (22, 38, 'It is in France!'), (40, 52, 'Lyon is not.')]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InputError


@dataclass(frozen=True)
class Span:
    """A piece of a text with its character offsets: ``text[start:end] == span.text``."""

    start: int
    end: int
    text: str
    score: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "text": self.text, "score": round(self.score, 6)}


_ABBREV = frozenset(
    """mr mrs ms dr prof sr jr st mt ft vs etc inc ltd co corp no vol fig al gen col lt sgt capt rev
    jan feb mar apr jun jul aug sep sept oct nov dec u.s e.g i.e approx est dept univ""".split()
)
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s+[\"'“‘(\[]?[A-Z0-9À-Ý])|\n\s*\n|\n(?=\s*[-*#•])")


def _regex_sentences(text: str) -> list[tuple[int, int]]:
    cuts = []
    for m in _BOUNDARY.finditer(text):
        if m.group().startswith((".",)) and len(m.group()) == 1:
            word = re.search(r"([\w.]+)\.$", text[max(0, m.start() - 12) : m.end()])
            w = word.group(1).lower() if word else ""
            if w in _ABBREV or (len(w) == 1 and w.isalpha()):  # "Dr." or an initial "J."
                continue
        cuts.append(m.end())
    out, start = [], 0
    for cut in [*cuts, len(text)]:
        out.append((start, cut))
        start = cut
    return out


def _blingfire_sentences(text: str) -> list[tuple[int, int]] | None:
    """blingfire's spans; None when blingfire is not installed."""
    try:
        import blingfire
    except ImportError:
        return None
    try:
        _, offsets = blingfire.text_to_sentences_and_offsets(text)
    except Exception:  # noqa: BLE001 - any native failure: the regex splitter takes over
        return _regex_sentences(text)
    return [(int(a), int(b)) for a, b in offsets]


def split_sentences(text: str, *, splitter: str = "auto") -> list[Span]:
    """Sentences of ``text`` as exact spans, surrounding whitespace left out, none empty.

    ``splitter``: ``"blingfire"`` (needs the ``models`` extra), ``"regex"`` (built in) or ``"auto"``
    (blingfire when installed).
    """
    if splitter not in ("auto", "blingfire", "regex"):
        raise InputError(f"splitter must be 'auto', 'blingfire' or 'regex', but got {splitter!r}")
    if not text.strip():
        return []
    raw = None
    if splitter != "regex":
        raw = _blingfire_sentences(text)
        if raw is None and splitter == "blingfire":
            from ..score.onnx import EXTRA_HINT

            raise ImportError(f"the blingfire splitter needs blingfire: {EXTRA_HINT}")
    if raw is None:
        raw = _regex_sentences(text)
    spans = []
    for a, b in raw:
        piece = text[a:b]
        lead = len(piece) - len(piece.lstrip())
        trail = len(piece) - len(piece.rstrip())
        a, b = a + lead, b - trail
        if b > a:
            spans.append(Span(a, b, text[a:b]))
    ordered = all(0 <= a.start < a.end <= b.start for a, b in zip(spans, spans[1:])) and all(
        s.end <= len(text) for s in spans)
    if not ordered or "".join("".join(s.text for s in spans).split()) != "".join(text.split()):
        # offsets that do not tile the text (odd code points in a native splitter): use the regex
        return split_sentences(text, splitter="regex") if splitter != "regex" else spans
    return spans


def join_spans(text: str, spans: Sequence[Span]) -> str:
    """Kept spans in order: neighbours keep the original text between them, gaps become one space.

    >>> t = "A b. C d. E f."
    >>> join_spans(t, [Span(0, 4, "A b."), Span(10, 14, "E f.")])
    'A b. E f.'
    """
    out: list[str] = []
    prev: Span | None = None
    for s in spans:
        if prev is not None:
            between = text[prev.end : s.start]
            out.append(between if between.strip() == "" and between else " ")
        out.append(s.text)
        prev = s
    return "".join(out)
