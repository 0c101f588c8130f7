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
from .prune.steps import extractive_summary, highlight, prune_chunk
from .score import get_scorer, register_scorer, scorer_names
from .score.rank import rank
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

# Modules that moved into the packages above: importing an old name still works, with a
# DeprecationWarning naming the new one (CHANGELOG.md). The old names go in 0.3.
MOVED = {
    "edgewise.counters": "edgewise.tokens.counters", "edgewise.encodings": "edgewise.tokens.encodings",
    "edgewise.countcache": "edgewise.tokens.cache", "edgewise.hf_tokenizer": "edgewise.tokens.hf",
    "edgewise.gguf_tokenizer": "edgewise.tokens.gguf", "edgewise.wordbound": "edgewise.tokens.wordbound",
    "edgewise.compiled": "edgewise.tokens.compiled", "edgewise.packer": "edgewise.packing.packer",
    "edgewise.select": "edgewise.packing.select", "edgewise.budget": "edgewise.packing.budget",
    "edgewise.debug": "edgewise.packing.debug", "edgewise.ranked": "edgewise.packing.plain",
    "edgewise.sentences": "edgewise.prune.sentences", "edgewise.sentence_scores": "edgewise.prune.scores",
    "edgewise.condense": "edgewise.prune.condense", "edgewise.models": "edgewise.catalog",
    "edgewise.textio": "edgewise.cli.textio",
}


class _Moved:
    """Finds a moved module's old name and hands back the module under its new one."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> object:
        if name not in MOVED:
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(name, _Moved())

    @staticmethod
    def create_module(spec: object) -> object:
        import importlib
        import warnings

        old = spec.name  # type: ignore[attr-defined]
        warnings.warn(f"{old} moved to {MOVED[old]}: import it from there ({old} goes in edgewise 0.3)",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(MOVED[old])

    @staticmethod
    def exec_module(module: object) -> None:
        pass


import sys as _sys  # noqa: E402

if not any(isinstance(finder, _Moved) for finder in _sys.meta_path):
    _sys.meta_path.append(_Moved())
