"""Layout policy the packer asks about, with defaults for layouts that declare none.

A layout (built in or a plugin) may define any of these methods; :mod:`edgewise.budget` and
:mod:`edgewise.pack` call them through the functions below, never by checking the layout's name.

- ``key_facts(high_importance_k) -> int | None``: how many top-ranked chunks are key facts, budgeted
  before the rest and never replaced by automatic summaries. ``None`` (the default): no key-facts
  tier, every chunk competes on rank alone.
- ``reminders(rendered, items) -> list[Item]``: items to repeat as reminders, in order, added while
  the budget allows (default: none).
- ``render_fixed(inp) -> Rendered``: the prompt with no chunks, whose cost is reserved first
  (default: ``render`` with no items).
"""

from __future__ import annotations

from .base import Item, Layout, Rendered, RenderInput


def key_facts(lay: Layout, high_importance_k: int) -> int | None:
    fn = getattr(lay, "key_facts", None)
    return fn(high_importance_k) if fn is not None else None


def reminder_candidates(lay: Layout, rendered: Rendered, items: list[Item]) -> list[Item]:
    fn = getattr(lay, "reminders", None)
    return list(fn(rendered, items)) if fn is not None else []


def render_fixed(lay: Layout, inp: RenderInput) -> Rendered:
    fn = getattr(lay, "render_fixed", None)
    return fn(inp) if fn is not None else lay.render(inp)
