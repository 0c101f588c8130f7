"""Layout policy the packer asks about, with defaults for layouts that declare none.

A layout (built in or a plugin) may define any of these methods; :mod:`edgewise.packing` calls them
through the functions below, never by checking the layout's name. The first five change what a pack
gives (which chunks are key facts, what is repeated, what is reserved, how a left-out chunk's reason
reads); the last three only let the fast paths (:mod:`edgewise.packing.fast`) skip work, and a pack
gives the same result without them.

- ``key_facts(high_importance_k) -> int | None``: how many top-ranked chunks are key facts, budgeted
  before the rest and never replaced by automatic summaries. ``None`` (the default): no key-facts
  tier, every chunk competes on rank alone.
- ``reminders(rendered, items) -> list[Item]``: items to repeat as reminders, in order, added while
  the budget allows (default: none).
- ``render_fixed(inp) -> Rendered``: the prompt with no chunks, whose cost is reserved first
  (default: ``render`` with no items).
- ``keeps_text_words = True``: a promise that ``block(item)`` holds every whitespace-separated word
  of ``item.text`` as a word of its own (it may add characters, indentation and tags, but never
  joins two words, drops whitespace between them, or puts ``/`` right after a line break), so a
  chunk's word count bounds its block's tokens from below and a chunk that cannot fit is skipped
  without encoding it (see :func:`edgewise.tokens.tokenizers.words_bound`). Default: no promise.
- ``tags_bound(chunk, tok) -> int``: a lower bound on the cost of the chunk's block truncated to no
  text, for an exact tokenizer; a chunk whose tags leave too little room is not truncated, and not
  rendered to find that out. It may read the chunk's title only: it is asked once per title, with
  a chunk that has no id or text. Default: none (the block is rendered and counted).
- ``title_tags_bound(title, tok) -> int``: the same bound from the title alone; asked instead of
  ``tags_bound`` when defined (a pack that skips thousands of chunks asks it once per title, and
  builds no chunk to ask).
- ``tags_pricer(tok) -> Callable[[str, str | None], int]``: for one pack, a function that gives
  exactly what the block of a chunk with that id and title, truncated to no text, costs (as ``block``
  would render it, with its line break), for an exact tokenizer. Asked, without building the chunk,
  for chunks whose ``tags_bound`` leaves room for a cut, so that a long run of them costs a count
  each, not a render each. Default: none (the block is rendered and counted).
- ``renders_by_name = True``: a promise that the layout renders the same for the same name (no file
  or other state behind it), so what its section headers and joins add to the blocks is measured
  once per name, layers and tokenizer. Default: measured for every pack.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..chunk import Chunk
from .base import Item, Layout, Rendered, RenderInput


def key_facts(lay: Layout, high_importance_k: int) -> int | None:
    fn = getattr(lay, "key_facts", None)
    return fn(high_importance_k) if fn is not None else None


def keeps_text_words(lay: Layout) -> bool:
    return getattr(lay, "keeps_text_words", False) is True


def renders_by_name(lay: Layout) -> bool:
    return getattr(lay, "renders_by_name", False) is True


def tags_bound(lay: Layout, tok: Any) -> Callable[[str | None], int] | None:
    """The layout's bound on a truncated chunk's tags, by the chunk's title, remembered per title
    for one pack."""
    by_chunk, fn = getattr(lay, "tags_bound", None), getattr(lay, "title_tags_bound", None)
    if (fn is None and by_chunk is None) or not getattr(tok, "split_proven", False):
        return None
    if fn is None:
        fn = lambda title, tok: by_chunk(Chunk("", "", title=title), tok)  # noqa: E731
    by_title: dict[str | None, int] = {}

    def bound(title: str | None) -> int:
        found = by_title.get(title)
        if found is None:  # an empty title is no title, as a chunk has it
            found = by_title[title] = fn(title or None, tok)
        return found

    return bound


def tags_cost(lay: Layout, tok: Any) -> Callable[[str, str | None], int] | None:
    """The layout's exact price of a chunk's block truncated to no text, by the chunk's id and
    title, for one pack."""
    fn = getattr(lay, "tags_pricer", None)
    if fn is None or not getattr(tok, "split_proven", False):
        return None
    return fn(tok)  # type: ignore[no-any-return]


def reminder_candidates(lay: Layout, rendered: Rendered, items: list[Item]) -> list[Item]:
    fn = getattr(lay, "reminders", None)
    return list(fn(rendered, items)) if fn is not None else []


def render_fixed(lay: Layout, inp: RenderInput) -> Rendered:
    fn = getattr(lay, "render_fixed", None)
    return fn(inp) if fn is not None else lay.render(inp)
