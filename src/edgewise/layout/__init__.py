"""Layouts: how selected, placed chunks become a prompt (a registry, like the orders)."""

from __future__ import annotations

from . import kv, layered, paper, sections, template  # noqa: F401  (each registers itself)
from .base import LAYOUTS, Item, Layout, Rendered, RenderInput, get_layout, layout, layout_names, quote, unquote
from .parse import Parsed, ParsedChunk, parse

__all__ = [
    "LAYOUTS", "Item", "Layout", "Parsed", "ParsedChunk", "Rendered", "RenderInput",
    "get_layout", "layout", "layout_names", "parse", "quote", "unquote",
]
