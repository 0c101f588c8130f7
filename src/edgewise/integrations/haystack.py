"""A Haystack component: ``EdgewiseRanker``, a drop-in for ``LostInTheMiddleRanker``.

Same inputs, outputs and checks (``top_k`` and ``word_count_threshold`` > 0 at init and at run;
duplicates by id keep the highest score; non-text documents are refused), plus an exact token
``budget`` and any edgewise order. Needs ``pip install -e '.[haystack]' (in an edgewise checkout)``.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..select import check_positive
from . import arrange

try:
    from haystack import Document, component
except ImportError:  # pragma: no cover - exercised by the base-install test
    raise ImportError("the Haystack adapter needs haystack-ai: pip install -e '.[haystack]' (in an edgewise checkout)") from None


@component
class EdgewiseRanker:
    """Lay documents out with the most relevant at the edges, within a word or token budget.

    >>> from haystack import Document
    >>> docs = [Document(content=str(i)) for i in range(1, 6)]
    >>> [d.content for d in EdgewiseRanker().run(documents=docs)["documents"]]
    ['1', '3', '5', '4', '2']
    """

    def __init__(
        self,
        word_count_threshold: int | None = None,
        top_k: int | None = None,
        *,
        budget: int | None = None,
        tokenizer: str = "cl100k_base",
        order: str = "edges",
    ) -> None:
        check_positive("top_k", top_k)
        check_positive("word_count_threshold", word_count_threshold)
        check_positive("budget", budget)
        self.word_count_threshold = word_count_threshold
        self.top_k = top_k
        self.budget = budget
        self.tokenizer = tokenizer
        self.order = order

    @component.output_types(documents=list[Document])
    def run(
        self, documents: list[Document], top_k: int | None = None, word_count_threshold: int | None = None
    ) -> dict[str, Any]:
        check_positive("top_k", top_k)
        check_positive("word_count_threshold", word_count_threshold)
        if any(d.content is None for d in documents):
            raise InputError("documents must all have text content, but some have content=None")
        docs = _dedup(documents)
        picked = arrange(
            [d.content or "" for d in docs], order=self.order, top_k=top_k or self.top_k,
            word_count_threshold=word_count_threshold or self.word_count_threshold,
            budget=self.budget, tokenizer=self.tokenizer,
        )
        return {"documents": [docs[i] for i in picked]}


def _dedup(documents: list[Document]) -> list[Document]:
    """Keep one document per id, the highest-scored, at its first position."""
    slot: dict[str, int] = {}
    out: list[Document] = []
    for doc in documents:
        if doc.id not in slot:
            slot[doc.id] = len(out)
            out.append(doc)
        elif _score(doc) > _score(out[slot[doc.id]]):
            out[slot[doc.id]] = doc
    return out


def _score(doc: Document) -> float:
    return doc.score if doc.score is not None else float("-inf")
