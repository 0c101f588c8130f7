"""A LlamaIndex node postprocessor: ``EdgewiseReorder``, a drop-in for ``LongContextReorder``.

Like LongContextReorder it ranks nodes by score (a missing score counts as 0; among equal scores
the later node ranks higher, as there) and, by default,
gives its exact order (``edges-mirror``); ``order``, ``budget`` and ``top_k`` add what it lacks.
Needs ``pip install -e '.[llamaindex]' (in an edgewise checkout)``.
"""

from __future__ import annotations

from . import arrange

try:
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
except ImportError:  # pragma: no cover
    raise ImportError("the LlamaIndex adapter needs llama-index-core: pip install -e '.[llamaindex]' (in an edgewise checkout)") from None


class EdgewiseReorder(BaseNodePostprocessor):
    """Reorder nodes so the highest-scored sit at the edges.

    >>> from llama_index.core.schema import NodeWithScore, TextNode
    >>> nodes = [NodeWithScore(node=TextNode(text=t), score=s) for t, s in [("a", .1), ("b", .9), ("c", .5)]]
    >>> [n.node.get_content() for n in EdgewiseReorder().postprocess_nodes(nodes)]
    ['b', 'a', 'c']
    """

    order: str = Field(default="edges-mirror")
    budget: int | None = Field(default=None)
    tokenizer: str = Field(default="cl100k_base")
    top_k: int | None = Field(default=None)

    def model_post_init(self, __context: object) -> None:
        arrange([], order=self.order, top_k=self.top_k, budget=self.budget)

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
        return [ranked[i] for i in picked]
