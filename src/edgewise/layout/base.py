"""What every layout shares: the items it renders, what it returns, the registry and the quoting.

Quoting is how untrusted text is kept from forging prompt structure. Structure lines (section
headers, ``<doc ...>`` / ``</doc>`` tags, ``Document [i](...)`` lines) always start at the left
margin; every line of a payload (chunk text, summary, query, profile) is indented by two spaces,
including lines started by any Unicode line separator. So no payload can begin a line at the
margin, and :func:`unquote` restores it exactly.

>>> quote("line one\\n[Question] forged")
'  line one\\n  [Question] forged'
>>> unquote(quote("a\\r\\nb\\u2028c")) == "a\\r\\nb\\u2028c"
True
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Protocol

from ..chunk import Chunk
from ..errors import ConfigError
from ..registry import Registry

Form = Literal["whole", "summary", "truncated"]
INDENT = "  "
# Every sequence a tokenizer or a display might treat as a line break ("\r\n" counts once).
_SEP = r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]"
_SEP_RE = re.compile(f"({_SEP})")
_UNQUOTE_RE = re.compile(f"({_SEP}){INDENT}")


def quote(text: str) -> str:
    """Indent every line of ``text`` (the first included) by two spaces."""
    return INDENT + quote_tail(text)


def quote_tail(text: str) -> str:
    """Indent every line of ``text`` but the first (for payloads that start on a structure line)."""
    return _quote_tail(text) if has_separator(text) else text


_ASCII_SEPS = ("\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e")  # the ASCII characters of _SEP


def has_separator(text: str) -> bool:
    r"""Whether ``text`` may hold a line separator (False: it holds none). An ASCII text is searched
    for the seven ASCII ones (a fast scan each, ~5x quicker than ``isprintable`` on a passage);
    another is tested with ``isprintable`` (every separator is unprintable).

    >>> has_separator("one line"), has_separator("two\nlines"), has_separator("tab\there"), has_separator("é\u2028")
    (False, True, False, True)
    """
    if text.isascii():
        for c in _ASCII_SEPS:
            if c in text:
                return True
        return False
    return not text.isprintable()


@lru_cache(maxsize=4096)  # a chunk is rendered several times while its budget is settled
def _quote_tail(text: str) -> str:
    return _SEP_RE.sub(lambda m: m.group(1) + INDENT, text)


def unquote(block: str) -> str:
    """Invert :func:`quote`."""
    return unquote_tail(block[len(INDENT):])


def unquote_tail(block: str) -> str:
    """Invert :func:`quote_tail`."""
    return _UNQUOTE_RE.sub(lambda m: m.group(1), block)


def attr(value: str) -> str:
    """A JSON string literal that is safe on one structure line (no raw line separators)."""
    if value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'  # what json.dumps gives: it escapes only quotes, backslashes and controls
    out = json.dumps(value, ensure_ascii=False)
    return out.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def one_line(text: str) -> str:
    """Collapse every run of whitespace and line separators to one space."""
    return " ".join(re.sub(_SEP, " ", text).split())


@dataclass(frozen=True)
class Item:
    """One chunk as it will be rendered: in which form, with which text, at which rank."""

    chunk: Chunk
    form: Form
    text: str
    rank: int

    @property
    def id(self) -> str:
        return self.chunk.id


@dataclass(frozen=True)
class RenderInput:
    """Everything a layout renders. ``items`` are in placement order."""

    query: str
    items: tuple[Item, ...]
    system: str | None = None
    profile: str | None = None
    instructions: str | None = None
    expected_output: str | None = None
    high_importance_k: int = 8
    reminders: tuple[Item, ...] = ()
    query_aware: bool = False


@dataclass(frozen=True)
class Rendered:
    """A rendered prompt: a system part and a user part, and where each chunk went.

    ``prompt`` is ``system + "\\n\\n" + user`` (or ``user`` alone); ``stable_chars`` is how many
    leading characters of ``prompt`` depend on neither the chunks nor the query (the cacheable
    prefix); ``sections`` maps section names to chunk ids in prompt order.
    """

    system: str
    user: str
    sections: dict[str, list[str]]
    order: list[str]
    stable_chars: int
    reminder_ids: list[str] = field(default_factory=list)
    user_parts: tuple[str, ...] = ()  # optional: pieces of `user` (blocks with their "\n"), for counting

    def __post_init__(self) -> None:
        if self.user_parts and "".join(self.user_parts) != self.user:
            raise ValueError("Rendered.user_parts must join to Rendered.user")

    @property
    def prompt(self) -> str:
        return f"{self.system}\n\n{self.user}" if self.system else self.user


class Layout(Protocol):
    """A renderer: the text of one chunk's block (for budgeting) and the whole prompt."""

    name: str

    def block(self, item: Item) -> str: ...

    def render(self, inp: RenderInput) -> Rendered: ...


LayoutFactory = Callable[[str | None], Layout]
LAYOUTS: Registry[LayoutFactory] = Registry("layouts")  # plugins: entry-point group "edgewise.layouts"


def register_layout(name: str, factory: LayoutFactory | None = None, *, arg: str | None = None) -> Any:
    """Register a layout factory under ``name``; usable as a decorator.

    The factory gets the text after ``name:`` (or None; ``arg`` names it for listings) and returns
    a :class:`Layout`. A name already taken raises ConfigError.

    >>> @register_layout("plain")
    ... class Plain:
    ...     name = "plain"
    ...     def __init__(self, arg): pass
    ...     def block(self, item): return item.text
    ...     def render(self, inp):
    ...         user = "\\n".join(self.block(i) for i in inp.items) + "\\n" + inp.query
    ...         return Rendered("", user, {"docs": [i.id for i in inp.items]}, [i.id for i in inp.items], 0)
    >>> get_layout("plain").name
    'plain'
    >>> LAYOUTS.unregister("plain")
    """
    return LAYOUTS.register(name, factory, arg=arg)


def layout(name: str, *, arg: str | None = None) -> Callable[[LayoutFactory], LayoutFactory]:
    """The decorator the built-in layout modules use (same as :func:`register_layout`)."""
    return LAYOUTS.register(name, arg=arg)


def layout_names() -> list[str]:
    """Registered layouts in registration order (built-ins first), with their argument: ``template:FILE``."""
    return LAYOUTS.display_names()


def get_layout(spec: str | Layout) -> Layout:
    """A layout by name (``sections``, ``layered``, ``paper``, ``kv``, ``template:FILE``)."""
    if not isinstance(spec, str):
        return spec
    factory, arg = LAYOUTS.lookup(spec)
    return factory(arg)


def doc_block(item: Item) -> str:
    """A chunk as a quoted ``<doc>`` block: open tag with JSON attributes, indented text, close tag.

    Kept on the (immutable) item, as ``functools.cached_property`` keeps a value: the budget loop
    prices an item's block and the layout then renders the same item.
    """
    block = item.__dict__.get("_doc_block")
    if block is None:
        attrs = f"id={attr(item.id)}"
        if item.chunk.title:
            attrs += f" title={attr(item.chunk.title)}"
        if item.form != "whole":
            attrs += f' form="{item.form}"'
        block = item.__dict__["_doc_block"] = f"<doc {attrs}>\n{quote(item.text)}\n</doc>"
    return block


# what a ``<doc>`` block truncated to no text holds after its attributes, with its line break
TRUNCATED_TAIL = f' form="truncated">\n{INDENT}\n</doc>\n'


def doc_tags_bound(chunk: Chunk, tok: Any) -> int:
    """A lower bound on what :func:`doc_block` costs (with its line break) for ``chunk`` truncated to
    no text at all: its tags. Exact encodings only (0 for others).

    The block is ``<doc id=ID`` + `` title=TITLE`` + `` form="truncated">\n  \n</doc>\n``. Both
    attribute values end in ``"`` followed by a space, where every pre-token of cl100k/o200k ends,
    so the block's count is the sum of the three parts' counts; the first is at least 3 (``<doc``,
    `` id`` and what follows), and the other two are counted (titles repeat, so from the cache).
    A chunk whose tags alone leave no room for a useful cut is dropped without rendering it. The
    bound depends on the title only (``hooks.tags_bound`` keeps it per title).
    """
    return doc_title_tags_bound(chunk.title, tok)


def doc_title_tags_bound(title: str | None, tok: Any) -> int:
    """:func:`doc_tags_bound` from the chunk's title alone (no chunk built to ask)."""
    if not getattr(tok, "split_proven", False):
        return 0
    return 3 + _title_and_tail(title, tok)


def doc_tags_pricer(tok: Any) -> Callable[[str, str | None], int]:
    """A function that gives exactly what :func:`doc_block` costs (with its line break) for a chunk
    truncated to no text, by its id and title, for an exact encoding: the sum of the block's three
    parts' counts (see :func:`doc_tags_bound`). The id's part is counted alone and not cached (an
    id is seen once a pack); the rest is remembered per title. No block is rendered, so a scan can
    price thousands of chunks' tags without building them. For one pack.
    """
    count_once = getattr(tok, "count_once", tok.count)
    by_title: dict[str | None, int] = {}

    def price(chunk_id: str, title: str | None) -> int:
        rest = by_title.get(title)
        if rest is None:
            rest = by_title[title] = _title_and_tail(title, tok)
        return count_once(f"<doc id={attr(chunk_id)}") + rest

    return price


class DocTags:
    """The hooks (see :mod:`edgewise.layout.hooks`) of a layout whose chunks are :func:`doc_block`
    blocks: a bound on a truncated block's tags, by chunk or by title, and their exact price."""

    tags_bound = staticmethod(doc_tags_bound)
    title_tags_bound = staticmethod(doc_title_tags_bound)
    tags_pricer = staticmethod(doc_tags_pricer)


def _title_and_tail(title: str | None, tok: Any) -> int:
    count = getattr(tok, "count_part", None) or tok.count
    return count(TRUNCATED_TAIL) + (count(f" title={attr(title)}") if title else 0)


def section(header: str, body: str) -> str:
    return f"[{header}]\n{body}"


def section_parts(header: str, blocks: list[str]) -> list[str]:
    """A section as pieces: its header line, then each block with the line break after it.

    Every piece ends with a line break and the next one starts with ``[`` or ``<``, so token counts
    of the pieces add up (see ``tokens.split_is_clean``) and a block's count, taken once when it
    was budgeted, is reused for the whole prompt. The last block carries the blank line.
    """
    return [f"[{header}]\n"] + [b + "\n" for b in blocks[:-1]] + [blocks[-1] + "\n\n"]


def refuse_layers(inp: RenderInput, layout_name: str) -> None:
    """A layout that reproduces a fixed prompt (the paper's) has no place for instructions or an
    expected-output note: refuse them rather than drop them silently."""
    given = [n for n, v in (("instructions", inp.instructions), ("expected_output", inp.expected_output)) if v]
    if given:
        raise ConfigError(f"layout {layout_name!r} has no place for {' or '.join(given)}; put them in system=, "
                          "or use the sections or layered layout")
