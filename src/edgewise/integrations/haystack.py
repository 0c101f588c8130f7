"""A Haystack component: ``EdgewiseRanker``, a drop-in for ``LostInTheMiddleRanker``.

Same inputs and outputs, and the same checks with the same errors: a ``ValueError`` (here
:class:`edgewise.InputError`, a subclass) with Haystack's own message for a ``top_k`` or a
``word_count_threshold`` that is an integer <= 0, and for documents without text; duplicates by id
keep the highest score, at the first one's place. It accepts what Haystack accepts, a float
``word_count_threshold`` included, and adds an exact token ``budget`` (the rule is in
:mod:`edgewise.integrations`) and any edgewise ``order``.
Needs ``pip install -e '.[haystack]' (in an edgewise checkout)``.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

from ..errors import InputError, missing_extra
from . import TRUNCATED_KEY, arrange, check_options

try:
    from haystack import Document, component
except ImportError:  # pragma: no cover - exercised by the base-install test
    raise missing_extra("the Haystack adapter", "haystack-ai", "haystack") from None

NOT_TEXT = "Some provided documents are not textual; LostInTheMiddleRanker can process only text."


@component
class EdgewiseRanker:
    """Lay documents out with the most relevant at the edges, within a word or token budget.

    Documents come best first (as from a retriever or a ranker). ``word_count_threshold`` and
    ``top_k`` work as in ``LostInTheMiddleRanker``; ``budget`` keeps the best documents whose exact
    token counts (``tokenizer``) fit, stopping at the first that does not, and cuts the best one to
    the budget when it does not fit alone, so the result is never empty; ``order`` is any edgewise
    placement (default ``"edges"``: Haystack's order).

    >>> from haystack import Document
    >>> docs = [Document(content=str(i)) for i in range(1, 6)]
    >>> [d.content for d in EdgewiseRanker().run(documents=docs)["documents"]]
    ['1', '3', '5', '4', '2']
    >>> [d.content for d in EdgewiseRanker(budget=3).run(documents=docs)["documents"]]
    ['1', '3', '2']
    """

    def __init__(
        self,
        word_count_threshold: float | None = None,
        top_k: int | None = None,
        *,
        budget: int | None = None,
        tokenizer: str = "cl100k_base",
        order: str = "edges",
    ) -> None:
        _check_like_haystack(word_count_threshold, top_k)
        _threshold(word_count_threshold)  # a type Haystack would choke on at run time fails here
        _top_k(top_k)
        check_options(order=order, budget=budget, tokenizer=tokenizer)
        self.word_count_threshold = word_count_threshold
        self.top_k = top_k
        self.budget = budget
        self.tokenizer = tokenizer
        self.order = order

    @component.output_types(documents=list[Document])
    def run(  # the input sockets' types are LostInTheMiddleRanker's, so the same connections are valid
        self, documents: list[Document], top_k: int | None = None, word_count_threshold: int | None = None
    ) -> dict[str, Any]:
        """Reorder ``documents`` (best first); ``top_k`` and ``word_count_threshold`` override the init values."""
        _check_like_haystack(word_count_threshold, top_k)
        if not documents:
            return {"documents": []}
        if any(d.content is None for d in documents):
            raise InputError(NOT_TEXT)
        # Haystack's own fallbacks, `or` included: a run value of 0.0 falls back to the init value.
        k = _top_k(top_k or self.top_k)
        threshold = _threshold(word_count_threshold or self.word_count_threshold)
        docs = _dedup(documents)
        texts = [d.content or "" for d in docs]
        if threshold is not None and threshold < 0:
            # Haystack keeps documents until the first with text: its words always reach a threshold < 0.
            first = next((i for i, d in enumerate(docs[:k]) if d.content), None)
            k, threshold = (k if first is None else first + 1), None
        picked = arrange(texts, order=self.order, top_k=k, word_count_threshold=threshold,
                         budget=self.budget, tokenizer=self.tokenizer)
        if picked.cut is not None:
            doc = docs[picked.cut.index]
            return {"documents": [dataclasses.replace(doc, content=picked.cut.text,
                                                      meta={**doc.meta, TRUNCATED_KEY: picked.cut.meta()})]}
        return {"documents": [docs[i] for i in picked.indexes]}


def _check_like_haystack(word_count_threshold: Any, top_k: Any) -> None:
    """LostInTheMiddleRanker's checks, in its order, with its messages."""
    if isinstance(word_count_threshold, int) and word_count_threshold <= 0:
        raise InputError(
            f"Invalid value for word_count_threshold: {word_count_threshold}. word_count_threshold must be > 0."
        )
    if isinstance(top_k, int) and top_k <= 0:
        raise InputError(f"top_k must be > 0, but got {top_k}")


def _top_k(value: Any) -> int | None:
    """``top_k`` as Haystack reads it: an integer (``True`` is 1); a float zero means none."""
    if value is None or (isinstance(value, float) and value == 0):
        return None
    if isinstance(value, numbers.Integral):  # bool and numpy integers included
        _check_like_haystack(None, int(value))
        return int(value)
    raise InputError(f"top_k must be an integer > 0, but got {value!r}")


def _threshold(value: Any) -> float | None:
    """``word_count_threshold`` as Haystack reads it: any real number; zero and NaN mean none, as
    does +inf (never reached); a negative float is reached by the first document with text."""
    if value is None:
        return None
    if isinstance(value, numbers.Integral):  # bool and numpy integers included: True is 1
        _check_like_haystack(int(value), None)
        # no text has 2**53 words: a larger threshold is never reached (and is no float)
        return None if value > 2**53 else int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        if value == 0 or math.isnan(value) or value == math.inf:
            return None
        return -1.0 if value < 0 else value
    raise InputError(f"word_count_threshold must be a number > 0, but got {value!r}")


def _dedup(documents: list[Document]) -> list[Document]:
    """Keep one document per id, the highest-scored (the first among equals), at its first position."""
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


from .haystack_builder import EdgewisePromptBuilder  # noqa: E402  (the packing component, re-exported)

__all__ = ["EdgewisePromptBuilder", "EdgewiseRanker"]
