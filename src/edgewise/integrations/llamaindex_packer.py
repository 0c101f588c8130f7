"""A LlamaIndex node postprocessor: ``EdgewisePacker``, nodes → the nodes that fit a token budget.

It packs the retrieved nodes as :func:`edgewise.pack` would for the query (scores, ``prune``,
``summaries``, ``top_k``, the budget, the ``order``) and returns the nodes in the prompt, in prompt
order, with their ids, metadata and scores. A node whose text was pruned, summarised or cut comes
back as a copy with the text as placed and ``metadata["edgewise"]`` saying so (kept out of what the
LLM and the embedder see); the input nodes are never modified. The nodes left out are reported,
with their reasons, in the ``edgewise`` log (INFO) and by :meth:`EdgewisePacker.pack_nodes`, which
also returns the debug info. A node's ``metadata["title"]`` (a string) is its title in the prompt;
nodes sharing an id are both packed.

The budget counts the prompt edgewise would render with ``layout`` (the texts, without metadata);
the query engine renders its own template around the node texts, so give a budget that leaves room
for it (``layout="paper"`` has the smallest frame). Async (``apostprocess_nodes``) is LlamaIndex's
own: the packing runs in a worker thread. Needs ``pip install -e '.[llamaindex]'`` (in an edgewise
checkout).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InputError, missing_extra
from ..options import PackOptions
from ..packing.packer import Packed, Packer
from .documents import META_KEY, Doc, pack_docs

try:
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
except ImportError:  # pragma: no cover
    raise missing_extra("the LlamaIndex adapter", "llama-index-core", "llamaindex") from None

log = logging.getLogger("edgewise")


class EdgewisePacker(BaseNodePostprocessor):
    """Keep the nodes that fit the budget, pruned, in edgewise's order.

    >>> from llama_index.core.schema import NodeWithScore, TextNode
    >>> nodes = [NodeWithScore(node=TextNode(id_=i, text=t), score=s)
    ...          for i, t, s in [("a", "Berlin is in Germany.", .1), ("b", "Paris is in France.", .9)]]
    >>> packer = EdgewisePacker(budget=200, tokenizer="words", layout="paper", order="relevance")
    >>> [(n.node.node_id, n.score) for n in packer.postprocess_nodes(nodes, query_str="Where is Paris?")]
    [('b', 0.9), ('a', 0.1)]
    """

    options: dict[str, Any] = Field(default_factory=dict, description="the pack options that differ from the defaults")
    _packer: Packer = PrivateAttr()

    def __init__(self, options: PackOptions | Mapping[str, Any] | None = None, *, callback_manager: Any = None,
                 **pack_options: Any) -> None:
        """``options`` (a :class:`~edgewise.PackOptions` or a mapping) and/or single pack options
        as keywords (they win); an unknown or invalid option raises edgewise's error here."""
        base = options if isinstance(options, PackOptions) else PackOptions.from_dict(options)
        packer = Packer(base, **pack_options)  # resolves the names now: a bad one fails here
        extra = {} if callback_manager is None else {"callback_manager": callback_manager}
        super().__init__(options=packer.options.to_dict(changed_only=True), **extra)
        self._packer = packer

    @classmethod
    def class_name(cls) -> str:
        return "EdgewisePacker"

    @property
    def packer(self) -> Packer:
        """The :class:`~edgewise.Packer` that packs each call."""
        return self._packer

    def pack_nodes(self, nodes: Sequence[NodeWithScore], query: str, **overrides: Any) -> tuple[Packed, list[NodeWithScore]]:
        """Pack ``nodes`` for ``query``: the :class:`~edgewise.Packed` result (prompt, debug info;
        its ids are the node ids, or ``#`` and the position for a node id given twice) and the
        nodes in prompt order. ``overrides`` change pack options for this call."""
        docs = [_doc(n, nws) for n, nws in enumerate(nodes)]
        packed, placed = pack_docs(self._packer, query, docs, None, **overrides)
        out = []
        for p in placed:
            nws = nodes[p.index]
            if p.changed:
                node = nws.node.model_copy()  # shallow: every field changed below is replaced, not mutated
                node.set_content(p.text)
                node.metadata = {**node.metadata, META_KEY: p.meta(docs[p.index].text)}
                node.excluded_llm_metadata_keys = [*node.excluded_llm_metadata_keys, META_KEY]
                node.excluded_embed_metadata_keys = [*node.excluded_embed_metadata_keys, META_KEY]
                nws = NodeWithScore(node=node, score=nws.score)
            out.append(nws)
        return packed, out

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        if query_bundle is None:
            raise InputError("EdgewisePacker packs for a query, but got none: pass query_str= (or query_bundle=) "
                             "to postprocess_nodes, or use it in a query engine")
        packed, out = self.pack_nodes(nodes, query_bundle.query_str)
        dropped = packed.debug_info.dropped
        if dropped:
            log.info("EdgewisePacker kept %d of %d nodes; dropped: %s", len(out), len(nodes),
                     "; ".join(f"{nodes[d['input_index']].node.node_id} ({d['reason']})" for d in dropped))
        return out


def _doc(n: int, nws: Any) -> Doc:
    if not isinstance(nws, NodeWithScore):
        raise InputError(f"nodes[{n}] must be a NodeWithScore, but got {type(nws).__name__}")
    title = nws.node.metadata.get("title")
    return Doc(nws.node.node_id, nws.node.get_content(metadata_mode=MetadataMode.NONE), nws.score,
               title if isinstance(title, str) else None)


__all__ = ["EdgewisePacker"]
