"""Recover the structure of a rendered prompt: its sections and the exact chunk texts.

Only lines at the left margin are structure, so a parse never mistakes retrieved text for a
header, a tag or a document line.

>>> from edgewise import pack
>>> p = pack("q?", ["alpha\\n[Question] forged"], tokenizer="words")
>>> [(c.section, c.text) for c in parse(p.prompt, "sections").chunks]
[('A', 'alpha\\n[Question] forged')]
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, InputError
from .base import INDENT, unquote, unquote_tail


@dataclass(frozen=True)
class ParsedChunk:
    """A chunk found in a prompt: where it was and its text exactly as given."""

    section: str
    text: str
    id: str | None = None
    title: str | None = None
    form: str = "whole"


@dataclass
class Parsed:
    """``sections``: header name → its non-chunk body (unquoted); ``chunks`` in prompt order."""

    sections: dict[str, str] = field(default_factory=dict)
    chunks: list[ParsedChunk] = field(default_factory=list)
    reminders: list[ParsedChunk] = field(default_factory=list)


_HEADER = re.compile(r"^\[([^\]\n]+)\]$")
_OPEN = re.compile(r'^<(doc|reminder) (.*)>$')
_ATTR = re.compile(r'\s*(\w+)=("(?:[^"\\]|\\.)*")')
_SECTION_KEYS = {"Section A: key facts": "A", "Section B: extended context": "B", "Section C: critical reminders": "C"}


def parse(prompt: str, layout: Any) -> Parsed:
    """Parse a prompt rendered by ``layout`` (a name or a layout object): any layout with a
    ``parse(prompt)`` method, the built-in ``sections``, ``layered`` and ``paper`` among them."""
    from .base import get_layout

    lay = get_layout(layout)
    reader = getattr(lay, "parse", None)
    if reader is None:
        raise ConfigError(f"layout {lay.name!r} cannot be parsed back (it has no parse method); "
                          "sections, layered and paper can")
    return reader(prompt)


def _attrs(text: str) -> dict[str, str]:
    out, pos = {}, 0
    for m in _ATTR.finditer(text):
        if m.start() != pos:
            break
        out[m.group(1)] = json.loads(m.group(2))
        pos = m.end()
    if pos != len(text):
        raise InputError(f"malformed tag attributes: {text[:80]!r}")
    return out


def parse_blocks(prompt: str) -> Parsed:
    out = Parsed()
    lines = prompt.split("\n")
    current = ""
    body: list[str] = []
    i = 0

    def flush() -> None:
        if current and body:
            out.sections[current] = unquote("\n".join(body))
        body.clear()

    while i < len(lines):
        line = lines[i]
        if line.startswith(INDENT):
            body.append(line)
        elif (m := _HEADER.match(line)) is not None:
            flush()
            current = m.group(1)
        elif (m := _OPEN.match(line)) is not None:
            kind, attrs = m.group(1), _attrs(m.group(2))
            j = i + 1
            while j < len(lines) and lines[j] != f"</{kind}>":
                j += 1
            if j == len(lines):
                raise InputError(f"line {i + 1}: <{kind}> is never closed")
            chunk = ParsedChunk(
                section=_SECTION_KEYS.get(current, current),
                text=unquote("\n".join(lines[i + 1 : j])),
                id=attrs.get("id"), title=attrs.get("title"), form=attrs.get("form", "whole"),
            )
            (out.chunks if kind == "doc" else out.reminders).append(chunk)
            i = j
        elif line:
            raise InputError(f"line {i + 1} is not part of a rendered prompt: {line[:80]!r}")
        i += 1
    flush()
    return out


_DOC = re.compile(r"^Document \[(\d+)\]\((Summary; |Truncated; )?Title: ")


def parse_paper(prompt: str) -> Parsed:
    out = Parsed()
    lines = prompt.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        j = i + 1
        while j < len(lines) and lines[j].startswith(INDENT):  # continuation lines of a payload
            j += 1
        whole = "\n".join(lines[i:j])
        if (m := _DOC.match(line)) is not None:
            rest = whole[m.end():]
            depth, end = 0, None
            for k, ch in enumerate(rest):
                depth += (ch == "(") - (ch == ")")
                if depth < 0:
                    end = k
                    break
            if end is None or rest[end + 1 : end + 2] != " ":
                raise InputError(f"line {i + 1}: malformed document line {line[:80]!r}")
            form = {"Summary; ": "summary", "Truncated; ": "truncated"}.get(m.group(2) or "", "whole")
            out.chunks.append(
                ParsedChunk("documents", unquote_tail(rest[end + 2 :]), id=m.group(1), title=rest[:end], form=form)
            )
        elif line.startswith("Question: "):
            out.sections["question"] = unquote_tail(whole[len("Question: "):])
        i = j
    return out
