"""edgewise: pack retrieved chunks into the prompt an LLM reads best.

>>> import edgewise
>>> packed = edgewise.pack("What is the capital of France?",
...                        ["Lyon is a city.", "Paris is the capital of France."], tokenizer="words")
>>> packed.debug_info.order
['chunk-0', 'chunk-1']
"""

from __future__ import annotations

# ruff: noqa: F401  (re-exports: the names below are edgewise's API, only some of them in __all__)
from . import layout, order, score, tokens  # edgewise.order and edgewise.layout are modules
from .chunk import Chunk, normalize
from .errors import BackendError, BudgetError, ConfigError, EdgewiseError, InputError
from .layout import get_layout, layout_names, parse, register_layout
from .options import PackOptions
from .order import order_names, place, register_order, reorder
from .packing.front import DebugInfo, Packed, pack, variants
from .packing.packer import Packer
from .packing.select import fit, limit
from .prune.steps import highlight, prune_chunk
from .prune.summaries import extractive_summary
from .score import get_scorer, register_scorer, scorer_names
from .score.ranking import rank
from .tokens.tokenizers import get_tokenizer, register_tokenizer, tokenizer_names

__version__ = "0.1.0"
# What `from edgewise import *` and the API reference show. The single steps of the pipeline
# (rank, limit, fit, place, get_layout, parse, highlight ...) stay importable from here and from
# their modules; what the registries hold is listed by `edgewise.registry.describe()`.
__all__ = [
    "pack", "variants", "Packer", "PackOptions", "Chunk", "Packed", "DebugInfo", "reorder", "get_tokenizer",
    "register_order", "register_layout", "register_scorer", "register_tokenizer",
    "EdgewiseError", "InputError", "ConfigError", "BudgetError", "BackendError",
]
