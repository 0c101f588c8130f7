"""``pack()``: query + retrieved chunks → the prompt an LLM should see. Wiring only.

score → prune → select (budget) → place (order) → render (layout) → debug; each step lives in its
own module and :class:`edgewise.packing.packer.Packer` wires them. ``pack()`` is a call on a shared default
``Packer``; build your own ``Packer`` to hold options and loaded models across requests.

>>> p = pack("Which city is the capital of France?",
...          [{"id": "a", "text": "Paris is the capital of France.", "score": 0.9},
...           {"id": "b", "text": "Lyon is known for its food.", "score": 0.2},
...           {"id": "c", "text": "France is in Europe.", "score": 0.5}],
...          budget=300, layout="paper")
>>> p.debug_info.order, p.debug_info.prompt_tokens <= 300  # best first, second best last
(['a', 'b', 'c'], True)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..chunk import Chunk
from ..errors import ConfigError, InputError
from ..options import PackOptions
from .debug import DebugInfo
from .packer import Packed, default_packer

#: what a packed prompt can be written as: the prompt text, Packed.to_dict() as JSON, or Packed.messages(format)
FORMATS = ("text", "json", "openai", "anthropic")
__all__ = ["DebugInfo", "FORMATS", "Packed", "pack", "variants"]


def pack(
    query: str,
    chunks: Iterable[Chunk | dict[str, Any] | str],
    options: PackOptions | Mapping[str, Any] | None = None,
    **overrides: Any,
) -> Packed:
    """Pack ``chunks`` for ``query`` into at most ``budget`` tokens of prompt.

    Options are a :class:`~edgewise.options.PackOptions` (or a dict of its fields), and/or keywords:
    ``pack(q, chunks, budget=4000, order="edges")``. ``budget`` counts the whole rendered prompt
    (and, separately, the contents of the chat messages), re-encoded with ``tokenizer``. ``order``
    is a placement strategy (``edges``, ``edges-mirror``, ``relevance``, ``reverse``, ``original``,
    ``middle-boost``, ``position:K``, ``calibrated:PROFILE.json``, or a plugin's); ``layout`` a
    renderer (``sections``, ``layered``, ``paper``, ``kv``, ``template:FILE``). Chunks without
    scores are ranked by input order, or by ``scorer``.

    ``prune`` (a threshold in [0, 1]) keeps only the sentences of each chunk that help the query
    (relative to the chunk's best sentence with ``prune_relative``); ``summaries="auto"`` writes an
    extractive summary of at most ``summary_tokens`` tokens for chunks past the key facts that have
    no ``meta.summary``. Both use the MiniLM sentence model with the ``models`` extra installed,
    and a lexical model otherwise (``prune_scorer`` picks). ``summaries="llm"`` has a model write
    the summaries that selection puts in (``summary_backend``: the bundled Gemma 3 270M in-process,
    or an OpenAI-compatible endpoint), cached on disk; see :mod:`edgewise.prune.summaries.llm`.
    """
    return default_packer().pack(query, chunks, options, **overrides)


SECTION_POSITIONS = {"A": "first", "B": "middle", "C": "last"}


def variants(
    query: str,
    chunks: Iterable[Chunk | dict[str, Any] | str],
    key_id: str,
    positions: Sequence[str | int] = ("first", "middle", "last"),
    *,
    layout: Any = "layered",
    **options: Any,
) -> dict[str, Packed]:
    """One packed prompt per position of the key chunk: the position-sensitivity test.

    The key chunk is always selected; the others keep their input order around it. Uses a flat
    layout (``layered``) by default, so the position is the key chunk's place among the documents.
    A position is ``first``, ``middle``, ``last`` or an index K (over the input chunks); with a
    layout that has sections (``sections``), also ``A``, ``B`` or ``C``: the key chunk opens the
    prompt among the key facts (A), sits only in the extended context in the middle (B), or closes
    it among the critical reminders (C).

    >>> v = variants("q", ["a", "b", "c"], key_id="chunk-2", tokenizer="words", layout="paper")
    >>> {name: p.debug_info.order for name, p in v.items()}
    {'first': ['chunk-2', 'chunk-0', 'chunk-1'], 'middle': ['chunk-0', 'chunk-2', 'chunk-1'], 'last': ['chunk-0', 'chunk-1', 'chunk-2']}
    """
    from ..layout import get_layout, hooks

    items = list(chunks)
    if "order" in options:
        raise InputError("variants sets the order itself (position:P); do not pass order=")
    packer = default_packer()
    base = PackOptions.from_dict({**options, "layout": layout, "key_id": key_id})
    has_sections = hooks.key_facts(get_layout(base.layout), base.high_importance_k) is not None
    out: dict[str, Packed] = {}
    for p in positions:
        name = str(p)
        if name in SECTION_POSITIONS:
            if not has_sections:
                raise ConfigError(f"position {name!r} names a section, but layout {base.to_dict()['layout']!r} has none; "
                                  "use first, middle, last or an index, or layout='sections'")
            opts = base.replace(order=f"position:{SECTION_POSITIONS[name]}")
            out[name] = packer.pack_with(query, items, opts, key_section=name)
        else:
            out[name] = packer.pack_with(query, items, base.replace(order=f"position:{p}"))
    return out
