"""Framework documents in, packed prompt and placed documents out: the packing components' shared core.

A framework document (Haystack ``Document``, LangChain ``Document``, LlamaIndex ``NodeWithScore``) is
seen as a :class:`Doc`: its id (or none), text, score, title. :func:`pack_docs` packs them with a
:class:`~edgewise.Packer` and says, for each document in the prompt, in prompt order, which input it
was and with which text it was placed (whole, pruned, summarised or cut); every other document is in
``debug_info.dropped`` with its reason. Each component turns :class:`Placed` back into its own
document type, with the original's id, score and metadata, and ``META_KEY`` added to the metadata
when the text differs from the original.

>>> from edgewise import Packer
>>> packed, placed = pack_docs(Packer(tokenizer="words", layout="paper"), "capital?",
...                            [Doc(None, "Berlin.", 0.2), Doc("p", "Paris.", 0.9)])
>>> [(p.index, p.chunk_id, p.text, p.form) for p in placed]
[(1, 'p', 'Paris.', 'whole'), (0, '#0', 'Berlin.', 'whole')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..packing.packer import Packed, Packer

META_KEY = "edgewise"  # the metadata key a placed document gains when its text was changed


@dataclass(frozen=True)
class Doc:
    """A framework document as edgewise reads it."""

    id: str | None
    text: str
    score: float | None = None
    title: str | None = None


@dataclass(frozen=True)
class Placed:
    """One document in the prompt: which input (``index``), under which chunk id, with which text."""

    index: int
    chunk_id: str
    text: str
    form: str  # whole | summary | truncated
    pruned: bool  # sentences were removed before it was placed

    @property
    def changed(self) -> bool:
        return self.form != "whole" or self.pruned

    def meta(self, original: str) -> dict[str, Any]:
        """What the document's metadata gains under ``META_KEY`` (only when ``changed``)."""
        return {"form": self.form, "pruned": self.pruned, "original_chars": len(original), "chars": len(self.text)}


def chunk_ids(ids: Sequence[str | None]) -> list[str]:
    """A unique chunk id per document: its own id when it has one no other document shares, else
    ``#`` and its position (so two documents with one id are both packed, neither merged away).

    >>> chunk_ids(["a", None, "b", "b", "#1"])
    ['a', '#1', '#2', '#3', '#4']
    """
    seen: dict[str, int] = {}
    for i in ids:
        if i is not None:
            seen[i] = seen.get(i, 0) + 1
    out = [i if i is not None and seen[i] == 1 and not i.startswith("#") else f"#{n}" for n, i in enumerate(ids)]
    return out


def pack_docs(packer: Packer, query: str, docs: Sequence[Doc], options: Any = None, **overrides: Any) -> tuple[Packed, list[Placed]]:
    """Pack ``docs`` for ``query``; the placed documents in prompt order."""
    ids = chunk_ids([d.id for d in docs])
    chunks = []
    for cid, d in zip(ids, docs):
        chunk: dict[str, Any] = {"id": cid, "text": d.text}
        if d.score is not None:
            chunk["score"] = float(d.score)
        if d.title:
            chunk["title"] = d.title
        chunks.append(chunk)
    packed = packer.pack(query, chunks, options, **overrides)
    at = {cid: n for n, cid in enumerate(ids)}
    placed = [Placed(at[it.id], it.id, it.text, it.form, "prune" in it.chunk.meta and it.text != docs[at[it.id]].text)
              for it in packed.items]
    return packed, placed
