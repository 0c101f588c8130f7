"""Drop-in adapters for the frameworks users already run (each needs its extra installed).

- ``edgewise.integrations.haystack.EdgewiseRanker`` — for Haystack's ``LostInTheMiddleRanker``
- ``edgewise.integrations.langchain.EdgewiseReorder`` — for LangChain's ``LongContextReorder``
- ``edgewise.integrations.llamaindex.EdgewiseReorder`` — for LlamaIndex's ``LongContextReorder``

With default arguments each returns exactly what the component it replaces returns; ``budget``
(exact tokens), ``tokenizer`` and ``order`` add what those components cannot do.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..chunk import Chunk
from ..layout.base import Item
from ..order import place, resolve
from ..select import check_positive, fit, limit
from ..tokens import get_tokenizer


def arrange(
    texts: Sequence[str],
    *,
    order: str,
    top_k: int | None = None,
    word_count_threshold: int | None = None,
    budget: int | None = None,
    tokenizer: str = "cl100k_base",
) -> list[int]:
    """Indexes of ``texts`` (given best first) to keep, in prompt order.

    The adapters' shared core: ``limit`` (top_k, word_count_threshold), then, with a ``budget``,
    whole texts in rank order while their exact token counts fit (a ranker returns documents, so
    nothing is truncated), then ``place``.

    >>> arrange(["a", "b", "c", "d", "e"], order="edges")
    [0, 2, 4, 3, 1]
    """
    resolve(order)
    check_positive("top_k", top_k)
    check_positive("word_count_threshold", word_count_threshold)
    check_positive("budget", budget)
    chunks = [Chunk(str(i), t) for i, t in enumerate(texts)]
    kept, _ = limit(chunks, top_k=top_k, word_count_threshold=word_count_threshold)
    if budget is not None:
        tok = get_tokenizer(tokenizer)
        chosen = fit(kept, budget, cost=lambda it: tok.count(it.text), tokenizer=tok, min_truncated_tokens=budget + 1)
        kept = [it.chunk for it in chosen.items if it.form == "whole"]
    ranks = [int(c.id) for c in kept]
    return [ranks[r] for r in place(order, len(ranks), input_order=range(len(ranks)))]


__all__ = ["Item", "arrange"]
