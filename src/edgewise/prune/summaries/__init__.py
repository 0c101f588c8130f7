"""Summaries: what a chunk that does not fit whole goes in as.

A chunk with a ``meta.summary`` of its own goes in as that summary. For the others, the
``summaries`` option (with ``summary_tokens``, and the ``summary_*`` options of LLM summaries, all
declared in :class:`~edgewise.options.PackOptions`) has one written:

- which chunks get one: :func:`summary_targets`, the chunks past the key facts with no summary of
  their own that are longer than ``summary_tokens``;
- ``summaries="auto"``: :func:`summary_step` gives each an extractive summary before selection
  (:mod:`~edgewise.prune.summaries.extractive`: its most query-relevant sentences, within the cap);
- ``summaries="llm"``: a model writes the summaries of those that selection puts in as summaries
  (:mod:`~edgewise.prune.summaries.llm`: the prompt, the reply cache, the backends).
  :class:`Summarizers` runs that selection for a :class:`~edgewise.packing.packer.Packer` and keeps
  one summariser per set of summary options.

Nothing is dropped here: a summary is written into a new chunk's ``meta.summary``, with
``meta.summary_source`` saying which kind it is.

>>> from edgewise.tokens.tokenizers import get_tokenizer
>>> chunks = [Chunk("a", "Paris is the capital of France."), Chunk("b", "Lyon is big. Paris is the capital of France.")]
>>> done = summary_step("capital of france", chunks, skip=1, max_tokens=8, tok=get_tokenizer("cl100k_base"),
...                     scorer="lexical")
>>> [(c.meta.get("summary"), c.meta.get("summary_source")) for c in done]
[(None, None), ('Paris is the capital of France.', 'extractive')]
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ...chunk import Chunk
from ...tokens.tokenizers import Tokenizer
from .extractive import extractive_summaries, extractive_summary

if TYPE_CHECKING:
    from ...layout import Item
    from ...options import PackOptions
    from .llm import LLMSummarizer

__all__ = ["Summarizers", "extractive_summaries", "extractive_summary", "summary_step", "summary_targets"]


def summary_targets(chunks: Sequence[Chunk], *, skip: int, max_tokens: int, tok: Tokenizer) -> list[int]:
    """The indexes of the chunks that get a written summary (extractive or LLM): past the first
    ``skip`` (the key facts), with no summary of their own, and longer than ``max_tokens``.

    >>> from edgewise.tokens.tokenizers import get_tokenizer
    >>> chunks = [Chunk("a", "one two three"), Chunk("b", "one two three"), Chunk("c", "one"),
    ...           Chunk("d", "one two three", meta={"summary": "one"})]
    >>> summary_targets(chunks, skip=1, max_tokens=2, tok=get_tokenizer("words"))
    [1]
    """
    return [i for i in range(skip, len(chunks)) if chunks[i].summary is None and tok.count(chunks[i].text) > max_tokens]


def summary_step(
    query: str, chunks: Sequence[Chunk], *, skip: int, max_tokens: int, tok: Tokenizer, scorer: str = "auto"
) -> list[Chunk]:
    """Extractive summaries for the chunks :func:`summary_targets` picks (their sentences go
    through the sentence model in one call): ``summaries="auto"``, before selection."""
    out = list(chunks)
    todo = summary_targets(chunks, skip=skip, max_tokens=max_tokens, tok=tok)
    texts = extractive_summaries(query, [chunks[i] for i in todo], max_tokens, tok, scorer=scorer) if todo else []
    for i, text in zip(todo, texts):
        if text:
            out[i] = replace(chunks[i], meta={**chunks[i].meta, "summary": text, "summary_source": "extractive"})
    return out


class Fitted(Protocol):
    """What selection gives back: the items it put in, each in its form (``"summary"``, ...)."""

    @property
    def items(self) -> Sequence[Item]: ...


F = TypeVar("F", bound=Fitted)


class Summarizers:
    """The LLM summaries of a long-lived packer: :meth:`select` runs selection with them, and the
    summariser of each set of summary options is made once, when a chunk first needs a summary (a
    local model loads then), and kept. Safe to call from many threads.

    >>> import tempfile
    >>> from edgewise.options import PackOptions
    >>> summarizers = Summarizers()
    >>> opts = PackOptions(summaries="llm", summary_backend="openai", summary_cache=tempfile.mkdtemp())
    >>> summarizers.get(opts) is summarizers.get(opts), summarizers.get(opts).where
    (True, 'http://127.0.0.1:8080/v1')
    >>> summarizers.check(opts.replace(summary_base_url="ftp://example.com"))
    Traceback (most recent call last):
    ...
    edgewise.errors.ConfigError: summary_base_url must start with http:// or https://, but got 'ftp://example.com'
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[tuple[Any, ...], tuple[Any, LLMSummarizer]] = {}  # options -> (backend given, summariser)

    def check(self, opts: PackOptions) -> None:
        """Refuse summary options of ``summaries="llm"`` that cannot work, before any model loads (see
        :func:`~edgewise.prune.summaries.llm.check_backend`); other ``summaries`` need no check."""
        if opts.summaries == "llm":
            from .llm import check_backend

            check_backend(opts.summary_backend, model=opts.summary_model, base_url=opts.summary_base_url)

    def select(self, query: str, chunks: Sequence[Chunk], opts: PackOptions, *, skip: int, tok: Tokenizer,
               fit: Callable[[Sequence[Chunk]], F]) -> tuple[F, list[dict[str, Any]] | None]:
        """``fit(chunks)``, with ``summaries="llm"`` the LLM summaries selection puts in (see
        :func:`~edgewise.prune.summaries.llm.llm_summary_step`), and one record per summary written
        (None unless ``summaries="llm"``: extractive summaries are written before, by :func:`summary_step`)."""
        if opts.summaries != "llm":
            return fit(chunks), None
        from .llm import llm_summary_step

        self.check(opts)

        def select(trial: Sequence[Chunk]) -> tuple[F, set[str]]:
            fitted = fit(trial)
            return fitted, {it.id for it in fitted.items if it.form == "summary"}

        return llm_summary_step(query, chunks, skip=skip, max_tokens=opts.summary_tokens, tok=tok,
                                summarizer=lambda: self.get(opts), budget=opts.budget, select=select)

    def get(self, opts: PackOptions) -> LLMSummarizer:
        """The :class:`~edgewise.prune.summaries.llm.LLMSummarizer` of ``opts``' summary options."""
        from .llm import cache_directory, make_summarizer

        backend = opts.summary_backend  # a name, or an object (kept alive by the entry: its id stays its own)
        key = (backend if isinstance(backend, str) else ("object", id(backend)), opts.summary_model,
               opts.summary_base_url, opts.summary_api, cache_directory(opts.summary_cache))
        with self._lock:
            found = self._made.get(key)
        if found is None:
            made = make_summarizer(backend, model=opts.summary_model, base_url=opts.summary_base_url,
                                   api=opts.summary_api, cache=opts.summary_cache)  # may load a model: outside the lock
            with self._lock:
                found = self._made.setdefault(key, (backend, made))
        return found[1]
