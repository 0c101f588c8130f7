"""Layouts: how selected, placed chunks become a prompt (a registry, like the orders)."""

from __future__ import annotations

from . import (  # each layout module registers itself
    kv,  # noqa: F401
    layered,  # noqa: F401
    paper,  # noqa: F401
    sections,  # noqa: F401
    template,  # noqa: F401
)
from .base import LAYOUTS, Item, Layout, Rendered, RenderInput, get_layout, layout, layout_names, quote, unquote
from .parse import Parsed, ParsedChunk, parse

__all__ = [
    "LAYOUTS", "Item", "Layout", "Parsed", "ParsedChunk", "Rendered", "RenderInput",
    "get_layout", "layout", "layout_names", "parse", "quote", "unquote",
]
