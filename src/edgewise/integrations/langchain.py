"""A LangChain document transformer: ``EdgewiseReorder``, a drop-in for ``LongContextReorder``.

By default it gives LongContextReorder's exact order (``edges-mirror``) for documents given best
first; ``order="edges"`` puts the best first instead, and ``budget`` / ``top_k`` bound the result.
Needs ``pip install -e '.[langchain]' (in an edgewise checkout)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import arrange

try:
    from langchain_core.documents import BaseDocumentTransformer, Document
except ImportError:  # pragma: no cover
    raise ImportError("the LangChain adapter needs langchain-core: pip install -e '.[langchain]' (in an edgewise checkout)") from None


class EdgewiseReorder(BaseDocumentTransformer):
    """Reorder retrieved documents so the most relevant sit at the edges.

    >>> from langchain_core.documents import Document
    >>> docs = [Document(page_content=str(i)) for i in range(1, 5)]
    >>> [d.page_content for d in EdgewiseReorder().transform_documents(docs)]
    ['2', '4', '3', '1']
    """

    def __init__(
        self, *, order: str = "edges-mirror", budget: int | None = None, tokenizer: str = "cl100k_base",
        top_k: int | None = None,
    ) -> None:
        arrange([], order=order, top_k=top_k, budget=budget)  # validate now, not at first use
        self.order, self.budget, self.tokenizer, self.top_k = order, budget, tokenizer, top_k

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        docs = list(documents)
        picked = arrange([d.page_content for d in docs], order=self.order, top_k=self.top_k,
                         budget=self.budget, tokenizer=self.tokenizer)
        return [docs[i] for i in picked]

    async def atransform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        return self.transform_documents(documents, **kwargs)
