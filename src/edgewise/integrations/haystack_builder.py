"""A Haystack component: ``EdgewisePromptBuilder``, documents + query → a packed prompt.

It sits where ``PromptBuilder`` / ``ChatPromptBuilder`` sit: its ``prompt`` (a ``str``, as
``PromptBuilder``'s) feeds a generator's ``prompt``, its ``messages`` (a ``list[ChatMessage]``: the
system message, if the layout has one, and the user message) feed a chat generator's ``messages``
(``ChatPromptBuilder`` calls that socket ``prompt``: connect ``builder.messages`` → ``llm.messages``).
It also returns ``debug_info`` (where every document went, :meth:`edgewise.DebugInfo.to_dict`) and
``documents``: the documents in the prompt, in prompt order, with their ids, scores and metadata;
a document whose text was pruned, summarised or cut comes back with the text as placed and
``meta["edgewise"]`` saying so. Every other document is in ``debug_info["dropped"]`` with its
``input_index`` (its position in ``documents``) and the reason. A document's ``meta["title"]`` (a
string) is its title in the prompt; documents sharing an id are both packed (the debug info names
them ``#`` and their position).

It takes the options of :func:`edgewise.pack` (``budget``, ``tokenizer``, ``model``, ``order``,
``layout``, ``prune``, ``summaries``, ...), checked when it is built; ``warm_up()`` loads the
tokenizer and any scoring model. Needs ``pip install -e '.[haystack]'`` (in an edgewise checkout).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError, InputError, missing_extra
from ..options import PackOptions
from ..packing.packer import Packer
from .documents import META_KEY, Doc, pack_docs

try:
    from haystack import Document, component, default_from_dict, default_to_dict
    from haystack.dataclasses import ChatMessage
except ImportError:  # pragma: no cover - exercised by the base-install test
    raise missing_extra("the Haystack adapter", "haystack-ai", "haystack") from None


@component
class EdgewisePromptBuilder:
    """Pack retrieved documents into a prompt under an exact token budget.

    >>> from haystack import Document
    >>> builder = EdgewisePromptBuilder(budget=200, tokenizer="words", layout="paper", order="relevance")
    >>> out = builder.run(query="capital of France?", documents=[
    ...     Document(id="b", content="Berlin is in Germany.", score=0.2),
    ...     Document(id="p", content="Paris is the capital of France.", score=0.9)])
    >>> [d.id for d in out["documents"]], out["debug_info"]["dropped"]
    (['p', 'b'], [])
    >>> print(out["prompt"].splitlines()[2])
    Document [1](Title: ) Paris is the capital of France.
    """

    def __init__(self, options: PackOptions | Mapping[str, Any] | None = None, **pack_options: Any) -> None:
        """``options`` (a :class:`~edgewise.PackOptions` or a mapping) and/or single pack options
        as keywords (they win); an unknown or invalid option raises edgewise's error here."""
        base = options if isinstance(options, PackOptions) else PackOptions.from_dict(options)
        self._packer = Packer(base, preload=False, **pack_options)
        self._warm = False
        _check_names(self._packer)

    @property
    def packer(self) -> Packer:
        """The :class:`~edgewise.Packer` that packs each run."""
        return self._packer

    def warm_up(self) -> None:
        """Load the tokenizer and any model the options use (a scorer, the pruning sentence scorer);
        a pipeline calls it before it runs, and only the first call does any work."""
        if self._warm:
            return
        self._packer.preload()
        opts = self._packer.options
        scorer = self._packer.scorer(opts)
        if scorer is not None:
            scorer.score("warm up", ["warm up"])  # model-backed scorers load their model on first use
        if opts.prune is not None or opts.summaries == "auto":
            from ..prune.scores import score_sentences

            score_sentences("warm up", "Warm up.", scorer=opts.prune_scorer)
        self._warm = True

    def to_dict(self) -> dict[str, Any]:
        """The component's type and the pack options that differ from the defaults (by name: an
        option given as a Python object cannot be written; register it and pass its name)."""
        opts = self._packer.options
        changed = opts.to_dict(changed_only=True)
        for name in changed:
            if getattr(opts, name) != changed[name]:
                raise ConfigError(f"option {name} must be given by name to serialise the component, but got a "
                                  f"{type(getattr(opts, name)).__name__} object; register it and pass its name")
        return default_to_dict(self, **changed)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EdgewisePromptBuilder:
        return default_from_dict(cls, data)

    @component.output_types(prompt=str, messages=list[ChatMessage], debug_info=dict[str, Any], documents=list[Document])
    def run(self, documents: list[Document], query: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Pack ``documents`` (best first, or with scores) for ``query``; ``options`` overrides pack
        options for this run only (e.g. ``{"budget": 1000}``)."""
        docs = [_doc(n, d) for n, d in enumerate(documents)]
        packed, placed = pack_docs(self._packer, query, docs, None, **(options or {}))
        out_docs = []
        for p in placed:
            doc = documents[p.index]
            if p.changed:
                doc = dataclasses.replace(doc, content=p.text, meta={**doc.meta, META_KEY: p.meta(doc.content or "")})
            out_docs.append(doc)
        messages = [ChatMessage.from_system(m["content"]) if m["role"] == "system" else ChatMessage.from_user(m["content"])
                    for m in packed.messages("openai")]
        return {"prompt": packed.prompt, "messages": messages, "debug_info": packed.debug_info.to_dict(),
                "documents": out_docs}

    @component.output_types(prompt=str, messages=list[ChatMessage], debug_info=dict[str, Any], documents=list[Document])
    async def run_async(self, documents: list[Document], query: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """:meth:`run` off the event loop (packing is CPU work: scoring, pruning, token counts)."""
        return await asyncio.to_thread(self.run, documents=documents, query=query, options=options)


def _doc(n: int, document: Any) -> Doc:
    if not isinstance(document, Document):
        raise InputError(f"documents[{n}] must be a haystack Document, but got {type(document).__name__}")
    if document.content is None:
        raise InputError(f"documents[{n}] (id {document.id!r}) has no text content; EdgewisePromptBuilder packs text")
    title = document.meta.get("title")
    return Doc(document.id, document.content, document.score, title if isinstance(title, str) else None)


def _check_names(packer: Packer) -> None:
    """Resolve the cheap names now (tokenizer, model, layout, order; the scorer's registry entry),
    so a bad one fails when the component is built; models load in ``warm_up()``."""
    opts = packer.options
    packer.tokenizer(opts)
    packer.layout(opts)
    from ..order import resolve

    resolve(opts.order)
    if isinstance(opts.scorer, str) and opts.scorer != "given":
        from ..score import SCORERS

        SCORERS.lookup(opts.scorer)


__all__ = ["EdgewisePromptBuilder"]
