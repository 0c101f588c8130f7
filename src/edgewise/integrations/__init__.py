"""Drop-in adapters for the frameworks users already run (each needs its extra installed).

- ``edgewise.integrations.haystack.EdgewiseRanker`` — for Haystack's ``LostInTheMiddleRanker``
- ``edgewise.integrations.langchain.EdgewiseReorder`` — for LangChain's ``LongContextReorder``
- ``edgewise.integrations.llamaindex.EdgewiseReorder`` — for LlamaIndex's ``LongContextReorder``

With default arguments each returns exactly what the component it replaces returns; ``budget``
(exact tokens), ``tokenizer`` and ``order`` add what those components cannot do.

The budget rule, the same in the three adapters: documents are taken in rank order, whole, while
their exact token counts (of the text alone: no metadata, no prompt template) add up to at most
``budget``; the first one that does not fit ends the selection, so a smaller document ranked lower
never takes the place of a better one, and the result is always the top n. If even the best
document does not fit alone, it is returned by itself, cut at a token boundary to at most
``budget`` tokens (its text is empty only if not one character of it fits): the result is never
empty for a non-empty input, as a ranker's never is, and never over the budget. Only then is a
document cut, because the alternative is to return nothing. The cut copy keeps its id, score and
metadata, and its metadata gains ``TRUNCATED_KEY`` (``{"tokens": kept, "original_tokens":
before}``), so nothing is shortened silently; the input objects are never modified.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..checks import check_int, check_str
from ..chunk import Chunk
from ..order import place, resolve
from ..packing.select import limit
from ..tokens.tokenizers import get_tokenizer

TRUNCATED_KEY = "edgewise_truncated"


@dataclass(frozen=True)
class Cut:
    """The best document, cut to the budget because it did not fit whole."""

    index: int  # into the texts given to :func:`arrange`
    text: str
    tokens: int
    original_tokens: int

    def meta(self) -> dict[str, int]:
        """What the cut copy's metadata gains under ``TRUNCATED_KEY``."""
        return {"tokens": self.tokens, "original_tokens": self.original_tokens}


@dataclass(frozen=True)
class Arrangement:
    """Which texts to return, in prompt order (indexes into the input), and the one cut, if any."""

    indexes: list[int]
    cut: Cut | None = None


def check_options(*, order: str, budget: int | None, tokenizer: str, top_k: int | None = None) -> None:
    """Validate the edgewise options of an adapter when it is built, not at its first call."""
    resolve(check_str("order", order))
    check_int("budget", budget, minimum=1, optional=True)
    check_int("top_k", top_k, minimum=1, optional=True)
    if budget is not None:
        get_tokenizer(check_str("tokenizer", tokenizer))


def within_budget(texts: Sequence[str], budget: int, tokenizer: str = "cl100k_base") -> tuple[int, Cut | None]:
    """How many of ``texts`` (best first) to keep whole under ``budget``; the best one cut if none fits.

    >>> within_budget(["one two", "three four five", "six"], 3)
    (1, None)
    >>> within_budget(["one two three four", "five"], 3)
    (0, Cut(index=0, text='one two three', tokens=3, original_tokens=4))
    """
    tok = get_tokenizer(tokenizer)
    used = 0
    for n, text in enumerate(texts):
        need = tok.count(text)
        if used + need > budget:
            if n > 0:
                return n, None
            cut = tok.truncate(text, budget)
            return 0, Cut(0, cut, tok.count(cut), need)
        used += need
    return len(texts), None


def arrange(
    texts: Sequence[str],
    *,
    order: str,
    top_k: int | None = None,
    word_count_threshold: float | None = None,
    budget: int | None = None,
    tokenizer: str = "cl100k_base",
) -> Arrangement:
    """Which of ``texts`` (given best first) to return, in prompt order.

    The adapters' shared core: :func:`edgewise.limit` (``top_k``, then Haystack's
    ``word_count_threshold``), then the budget rule of :func:`within_budget`, then
    :func:`edgewise.place` with ``order``.

    >>> arrange(["a", "b", "c", "d", "e"], order="edges").indexes
    [0, 2, 4, 3, 1]
    >>> arrange(["a b", "c d e", "f"], order="edges", budget=3).indexes
    [0]
    """
    check_options(order=order, budget=budget, tokenizer=tokenizer, top_k=top_k)
    kept, _ = limit([Chunk(str(i), t) for i, t in enumerate(texts)], top_k=top_k, word_count_threshold=word_count_threshold)
    ranks = [int(c.id) for c in kept]
    cut = None
    if budget is not None:
        n, cut = within_budget([texts[r] for r in ranks], budget, tokenizer)
        if cut is not None:
            return Arrangement([ranks[0]], Cut(ranks[0], cut.text, cut.tokens, cut.original_tokens))
        ranks = ranks[:n]
    return Arrangement([ranks[r] for r in place(order, len(ranks), input_order=range(len(ranks)))])


__all__ = ["TRUNCATED_KEY", "Arrangement", "Cut", "arrange", "check_options", "within_budget"]
