"""A LlamaIndex node postprocessor: ``EdgewiseReorder``, a drop-in for ``LongContextReorder``.

Like LongContextReorder it ranks nodes by score (a missing score counts as 0; among equal scores
the later node ranks higher, as there) and, by default, gives its exact order (``edges-mirror``),
returning the very ``NodeWithScore`` objects it was given; ``order``, ``top_k`` and ``budget`` add
what it lacks (the budget counts each node's text without metadata; the rule is in
:mod:`edgewise.integrations`).
Needs ``pip install -e '.[llamaindex]' (in an edgewise checkout)``.
"""

from __future__ import annotations

from typing import Any

from ..errors import missing_extra
from . import TRUNCATED_KEY, arrange, check_options

try:
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
except ImportError:  # pragma: no cover
    raise missing_extra("the LlamaIndex adapter", "llama-index-core", "llamaindex") from None


class EdgewiseReorder(BaseNodePostprocessor):
    """Reorder nodes so the highest-scored sit at the edges.

    >>> from llama_index.core.schema import NodeWithScore, TextNode
    >>> nodes = [NodeWithScore(node=TextNode(text=t), score=s) for t, s in [("a", .1), ("b", .9), ("c", .5)]]
    >>> [n.node.get_content() for n in EdgewiseReorder().postprocess_nodes(nodes)]
    ['b', 'a', 'c']
    >>> [n.node.get_content() for n in EdgewiseReorder(budget=2).postprocess_nodes(nodes)]
    ['c', 'b']
    """

    order: str = Field(default="edges-mirror")
    budget: int | None = Field(default=None)
    tokenizer: str = Field(default="cl100k_base")
    top_k: int | None = Field(default=None)

    def __init__(
        self, *, order: str = "edges-mirror", budget: int | None = None, tokenizer: str = "cl100k_base",
        top_k: int | None = None, **kwargs: Any,
    ) -> None:
        # checked before pydantic sees them, so a bad value is an edgewise error, not a ValidationError
        check_options(order=order, budget=budget, tokenizer=tokenizer, top_k=top_k)
        super().__init__(order=order, budget=budget, tokenizer=tokenizer, top_k=top_k, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "EdgewiseReorder"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        # LongContextReorder's own ranking, ties included: a stable ascending sort, read from the end
        ranked = sorted(nodes, key=lambda n: n.score if n.score is not None else 0.0)[::-1]
        picked = arrange([n.node.get_content(metadata_mode=MetadataMode.NONE) for n in ranked], order=self.order,
                         top_k=self.top_k, budget=self.budget, tokenizer=self.tokenizer)
        if picked.cut is not None:
            best = ranked[picked.cut.index]
            node = best.node.model_copy()
            node.set_content(picked.cut.text)
            # recorded in the metadata, kept out of what the LLM and the embedder see
            node.metadata = {**node.metadata, TRUNCATED_KEY: picked.cut.meta()}
            node.excluded_llm_metadata_keys = [*node.excluded_llm_metadata_keys, TRUNCATED_KEY]
            node.excluded_embed_metadata_keys = [*node.excluded_embed_metadata_keys, TRUNCATED_KEY]
            return [NodeWithScore(node=node, score=best.score)]
        return [ranked[i] for i in picked.indexes]


from .llamaindex_packer import EdgewisePacker  # noqa: E402  (the packing postprocessor, re-exported)

__all__ = ["EdgewisePacker", "EdgewiseReorder"]
