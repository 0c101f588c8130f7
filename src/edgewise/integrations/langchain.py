"""LangChain: ``EdgewiseReorder``, a drop-in for ``LongContextReorder``; and, from
:mod:`edgewise.integrations.langchain_packer`, the packing components ``EdgewisePacker`` (a Runnable
that packs the prompt), ``EdgewiseCompressor`` (for ``ContextualCompressionRetriever``) and
``EdgewiseEmbeddings`` (the bundled MiniLM for an offline vector store).

``EdgewiseReorder``, by default, gives LongContextReorder's exact order (``edges-mirror``: the best document last) for
documents given best first, and returns the very objects it was given (ids and metadata intact);
``order="edges"`` puts the best first instead, ``top_k`` keeps the first k, and ``budget`` keeps
the best documents whose exact token counts fit (the rule is in :mod:`edgewise.integrations`).
Needs ``pip install -e '.[langchain]' (in an edgewise checkout)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import missing_extra
from . import TRUNCATED_KEY, arrange, check_options

try:
    from langchain_core.documents import BaseDocumentTransformer, Document
    from pydantic import BaseModel, ConfigDict
except ImportError:  # pragma: no cover
    raise missing_extra("the LangChain adapter", "langchain-core", "langchain") from None

from .langchain_packer import EdgewiseCompressor, EdgewiseEmbeddings, EdgewisePacker  # the packing components


class EdgewiseReorder(BaseDocumentTransformer, BaseModel):
    """Reorder retrieved documents (given best first) so the most relevant sit at the edges.

    A pydantic model like the ``LongContextReorder`` it replaces: ``model_dump()`` gives its options
    and ``EdgewiseReorder.model_validate(them)`` builds the same transformer (options checked either
    way; bad ones raise edgewise's ``InputError``/``ConfigError`` from the constructor, a pydantic
    ``ValidationError`` from ``model_validate``).

    >>> from langchain_core.documents import Document
    >>> docs = [Document(page_content=str(i)) for i in range(1, 5)]
    >>> [d.page_content for d in EdgewiseReorder().transform_documents(docs)]
    ['2', '4', '3', '1']
    >>> [d.page_content for d in EdgewiseReorder(order="edges", budget=3).transform_documents(docs)]
    ['1', '3', '2']
    >>> EdgewiseReorder(top_k=2).model_dump()
    {'order': 'edges-mirror', 'budget': None, 'tokenizer': 'cl100k_base', 'top_k': 2}
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", strict=True)

    order: str = "edges-mirror"
    budget: int | None = None
    tokenizer: str = "cl100k_base"
    top_k: int | None = None

    def __init__(
        self, *, order: str = "edges-mirror", budget: int | None = None, tokenizer: str = "cl100k_base",
        top_k: int | None = None, **kwargs: Any,
    ) -> None:
        # model_validate calls this too (pydantic runs a model's own __init__), wrapping these errors
        check_options(order=order, budget=budget, tokenizer=tokenizer, top_k=top_k)
        super().__init__(order=order, budget=budget, tokenizer=tokenizer, top_k=top_k, **kwargs)

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        docs = list(documents)
        picked = arrange([d.page_content for d in docs], order=self.order, top_k=self.top_k,
                         budget=self.budget, tokenizer=self.tokenizer)
        if picked.cut is not None:
            doc = docs[picked.cut.index]
            return [doc.model_copy(update={"page_content": picked.cut.text,
                                           "metadata": {**doc.metadata, TRUNCATED_KEY: picked.cut.meta()}})]
        return [docs[i] for i in picked.indexes]

    async def atransform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        return self.transform_documents(documents, **kwargs)


__all__ = ["EdgewiseCompressor", "EdgewiseEmbeddings", "EdgewisePacker", "EdgewiseReorder"]
