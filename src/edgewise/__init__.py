"""edgewise: pack retrieved chunks into the prompt an LLM reads best.

>>> import edgewise
>>> packed = edgewise.pack("What is the capital of France?",
...                        ["Lyon is a city.", "Paris is the capital of France."], tokenizer="words")
>>> packed.debug_info.order
['chunk-0', 'chunk-1']
"""

from __future__ import annotations

from .chunk import Chunk, normalize
from .errors import BudgetError, ConfigError, EdgewiseError, InputError
from .layout import get_layout, layout, layout_names, parse
from .order import order, order_names, place, reorder
from .options import PackOptions
from .pack import DebugInfo, Packed, pack, variants
from .packer import Packer
from .prune import extractive_summary, highlight, prune_chunk
from .score import get_scorer, scorer, scorer_names
from .score.rank import rank
from .select import fit, limit
from .tokens import get_tokenizer, tokenizer_names

__version__ = "0.1.0"
__all__ = [
    "BudgetError", "Chunk", "ConfigError", "DebugInfo", "EdgewiseError", "InputError", "PackOptions", "Packed", "Packer",
    "extractive_summary", "fit", "get_layout", "highlight", "prune_chunk", "get_scorer", "get_tokenizer", "layout", "layout_names", "limit", "normalize",
    "order", "order_names", "pack", "parse", "place", "rank", "reorder", "scorer", "scorer_names",
    "tokenizer_names", "variants",
]
