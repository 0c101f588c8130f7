"""Layouts: how selected, placed chunks become a prompt (a registry, like the orders)."""

from __future__ import annotations

# Each layout module registers itself; this import order is the order `edgewise list` shows.
# isort: off
from . import sections, layered, paper, kv, template  # noqa: F401
# isort: on
from .base import (
    LAYOUTS,
    Item,
    Layout,
    Rendered,
    RenderInput,
    get_layout,
    layout,
    layout_names,
    quote,
    register_layout,
    unquote,
)
from .parsing import Parsed, ParsedChunk, parse

__all__ = [
    "LAYOUTS", "Item", "Layout", "Parsed", "ParsedChunk", "Rendered", "RenderInput",
    "get_layout", "layout", "layout_names", "parse", "quote", "register_layout", "unquote",
]
