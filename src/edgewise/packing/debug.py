"""``DebugInfo``: where every input chunk went and why, and what the prompt costs.

The schema is fixed: every record in ``chunks`` carries the same keys (:data:`CHUNK_KEYS`, ``None``
where a key does not apply), so a batch of debug records is one Arrow/Parquet table.
``input_index`` is the position in the caller's input, duplicates included. The record of a chunk
that pruning cut (``prune=``) says so: its reason starts "pruned to K of N characters", and it has one
key more, :data:`PRUNED_KEY`: its record of ``DebugInfo.pruned`` without the id.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from operator import itemgetter
from typing import Any

from ..chunk import Chunk, Merged
from ..layout import Item, Rendered
from .fast import ids, ids_scores
from .select import Run

CHUNK_KEYS = ("id", "input_index", "rank", "score", "outcome", "reason", "position", "section", "tokens", "merged_into")
OUTCOMES = ("placed", "summarized", "truncated", "dropped")
_OUTCOME = {"whole": "placed", "summary": "summarized", "truncated": "truncated"}
_REASON = {"whole": "fits whole", "summary": "given summary fits where the whole chunk does not",
           "truncated": "cut at a token boundary to fit"}
#: the key the record of a chunk pruning cut has after :data:`CHUNK_KEYS` (absent from the others):
#: ``{"original_chars", "kept_chars", "score"}``, its record of ``DebugInfo.pruned`` without the id
PRUNED_KEY = "pruned"
# the reason of a chunk placed as a summary the pack wrote, by its meta.summary_source
_WRITTEN = {"extractive": "extractive summary fits where the whole chunk does not",
            "llm": "LLM summary fits where the whole chunk does not"}


@dataclass(eq=False)
class DebugInfo:
    """Where every chunk went and why, and what the prompt costs.

    A chunk that pruning cut (``prune=``) says so in its ``chunks`` record: the reason starts with
    what it kept ("pruned to 59 of 1,189 characters, fits"), and the record has one key after
    :data:`CHUNK_KEYS`, ``pruned``: its entry of ``pruned`` (``original_chars``, ``kept_chars``,
    ``score``) without the id. A chunk cut and then left out keeps the reason it was left out.

    ``chunks`` (one record per input chunk, in input order) and ``dropped`` are built when first
    read, so a pack of 20,000 chunks of which 20 fit does not pay for 20,000 dicts it may never
    look at; ``to_dict`` and equality read them like any other field.
    """

    order: list[str]
    section_A_ids: list[str]
    section_B_ids: list[str]
    section_C_ids: list[str]
    sections: dict[str, list[str]]
    placed: list[str]
    summarized: list[str]
    truncated: list[str]
    reminders: list[str]
    pruned: list[dict[str, Any]]
    prompt_tokens: int
    message_tokens: int
    budget: int | None
    remaining_tokens: int | None
    tokenizer: str
    estimated: bool
    cache_prefix_tokens: int
    strategy: str
    layout: str
    scorer: str
    render_passes: int
    records: Callable[[], list[dict[str, Any]]] = field(default=list, repr=False)
    #: the ``dropped`` list alone, without the records of every chunk (None: read off ``chunks``)
    dropped_records: Callable[[], list[dict[str, Any]]] | None = field(default=None, repr=False, compare=False)
    #: ``summaries="llm"`` only (else None, and absent from :meth:`to_dict`): one record per chunk the
    #: model summarised, whatever its outcome, with the keys of
    #: :data:`edgewise.prune.summaries.llm.RECORD_KEYS`: ``source`` ("llm"), ``backend``, ``model``,
    #: ``cache_hit``, ``cache_key``, ``tokens`` (by the pack's counter), ``cut`` (the reply was cut to
    #: ``summary_tokens``) and ``note`` (a corrupt cache entry replaced, an empty reply...)
    summaries: list[dict[str, Any]] | None = None
    #: ``order="auto"`` only (else None, and absent from :meth:`to_dict`): what placed the chunks and
    #: why, ``{"requested": "auto", "order", "reason", "prune", "profile": {name, path, model, task,
    #: layout, n_docs} or None}`` (see :class:`edgewise.order.profiles.Choice`)
    placement: dict[str, Any] | None = None

    @property
    def chunks(self) -> list[dict[str, Any]]:
        """One record per input chunk, in input order, each with every key of :data:`CHUNK_KEYS` (and,
        for a chunk pruning cut, :data:`PRUNED_KEY` after them)."""
        built = self.__dict__.get("_chunks")
        if built is None:
            built = self.__dict__["_chunks"] = self.records()
        return built

    @property
    def dropped(self) -> list[dict[str, Any]]:
        """The chunks left out: id, input index and reason, in input order."""
        built = self.__dict__.get("_dropped")
        if built is None:
            if self.dropped_records is not None and "_chunks" not in self.__dict__:
                built = self.dropped_records()  # the same list, without building a record per chunk
            else:
                built = [{"id": r["id"], "input_index": r["input_index"], "reason": r["reason"]}
                         for r in self.chunks if r["outcome"] == "dropped"]
            self.__dict__["_dropped"] = built
        return built

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        self.chunks  # noqa: B018 - built first: dropped is then read off the records it holds anyway
        for name in _FIELDS:
            value = getattr(self, name)
            if name == "pruned":
                value = copy.deepcopy(value)  # nested: sentence spans
            elif name == "chunks":  # a pruned chunk's record nests its pruning record
                value = [_copied(r) for r in value]
            elif isinstance(value, list):
                value = [dict(v) if isinstance(v, dict) else v for v in value]
            elif isinstance(value, dict):
                value = {k: list(v) for k, v in value.items()}
            out[name] = value
        if self.summaries is not None:
            out["summaries"] = [dict(r) for r in self.summaries]
        if self.placement is not None:
            out["placement"] = copy.deepcopy(self.placement)
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DebugInfo) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment] - mutable, like the dataclass it was


def _copied(record: dict[str, Any]) -> dict[str, Any]:
    out = dict(record)
    if (cut := out.get(PRUNED_KEY)) is not None:
        out[PRUNED_KEY] = dict(cut)
    return out


# to_dict's keys, in the order they have always been written
_FIELDS = ("order", "section_A_ids", "section_B_ids", "section_C_ids", "sections", "placed", "summarized", "truncated",
           "dropped", "chunks", "reminders", "pruned", "prompt_tokens", "message_tokens", "budget", "remaining_tokens",
           "tokenizer", "estimated", "cache_prefix_tokens", "strategy", "layout", "scorer", "render_passes")


@dataclass(frozen=True)
class PackTrace:
    """What the steps of one pack produced: the one argument of :func:`build`, filled by the packer.

    ``dropped`` are chunks left out one by one with their reasons, ``runs`` chunks left out together
    (see :class:`edgewise.packing.select.Fit`), ``merged`` duplicates folded into a kept chunk; ``ranked``
    are all ranked chunks, best first: a record's rank is its place there. ``cost`` gives an item's
    tokens (from the pack's memo). ``strategy``, ``layout`` and ``scorer`` are the names of the
    order, layout and ranking used; ``passes`` counts the renders selection needed.
    """

    rendered: Rendered
    items: Sequence[Item]
    dropped: Sequence[tuple[Chunk, str]]
    merged: Sequence[Merged]
    input_index: Mapping[str, int]
    ranked: Sequence[Chunk]
    cost: Callable[[Item], int]
    prompt_tokens: int
    message_tokens: int
    cache_prefix_tokens: int
    budget: int | None
    tokenizer: str
    estimated: bool
    strategy: str
    layout: str
    scorer: str
    passes: int
    pruned: list[dict[str, Any]]
    runs: Sequence[Run] = ()
    summaries: list[dict[str, Any]] | None = None  # the LLM summaries' records (summaries="llm")
    placement: dict[str, Any] | None = None  # what order="auto" chose, and why


def build(trace: PackTrace) -> DebugInfo:
    """Assemble the debug record of one pack from what each step produced (the per-chunk records
    when they are first read). A placed item carries its rank and its chunk's score."""
    t, items = trace, list(trace.items)
    tokens = [t.cost(it) for it in items]  # from the pack's memo: the records need not keep it alive
    of: dict[str, list[str]] = {k: [] for k in OUTCOMES}
    for it in sorted(items, key=lambda it: t.input_index[it.id]):
        of[_OUTCOME[it.form]].append(it.id)
    left = (items, tokens, list(t.dropped), list(t.runs), list(t.merged))
    rendered, total = t.rendered, max(t.prompt_tokens, t.message_tokens)
    return DebugInfo(
        order=list(rendered.order),
        section_A_ids=rendered.sections.get("A", []),
        section_B_ids=rendered.sections.get("B", []),
        section_C_ids=rendered.sections.get("C", []),
        sections=rendered.sections,
        placed=of["placed"], summarized=of["summarized"], truncated=of["truncated"],
        reminders=list(rendered.reminder_ids),
        pruned=t.pruned,
        prompt_tokens=t.prompt_tokens,
        message_tokens=t.message_tokens,
        budget=t.budget,
        remaining_tokens=None if t.budget is None else t.budget - total,
        tokenizer=t.tokenizer,
        estimated=t.estimated,
        cache_prefix_tokens=t.cache_prefix_tokens,
        strategy=t.strategy, layout=t.layout, scorer=t.scorer, render_passes=t.passes,
        records=partial(_records, rendered, t.input_index, t.ranked, *left, cuts=t.pruned),
        dropped_records=partial(_dropped, t.input_index, *left[2:]),
        summaries=t.summaries, placement=t.placement,
    )


def _records(rendered: Rendered, input_index: Mapping[str, int], ranked: Sequence[Chunk], items: list[Item],
             tokens: list[int], dropped: list[tuple[Chunk, str]], runs: list[Run], merged: list[Merged], *,
             cuts: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """One record per input chunk, in input order: the placed items, then those left out. ``cuts``
    are the pruning records (``DebugInfo.pruned``): a chunk among them says it was pruned."""
    position = {cid: p for p, cid in enumerate(rendered.order)}
    section_of = {cid: name for name, ids in rendered.sections.items() for cid in ids}
    placed = [
        {"id": it.id, "input_index": input_index[it.id], "rank": it.rank, "score": it.chunk.score,
         "outcome": _OUTCOME[it.form],
         "reason": _summary_reason(it.chunk) if it.form == "summary" else _REASON[it.form],
         "position": position.get(it.id), "section": section_of.get(it.id), "tokens": n, "merged_into": None}
        for it, n in zip(items, tokens)
    ]
    if cuts:
        mark_pruned(placed, cuts)
    in_order = ids(ranked)
    rank_of = dict(zip(in_order, range(len(in_order))))
    # (id, score, reason) of each chunk left out; a lazy run's read off its columns, no chunk built
    left_out = [(c.id, c.score, why) for c, why in dropped]
    for chunks, why in runs:  # one reason for all, or one each
        left_out += ([(cid, score, why) for cid, score in ids_scores(chunks)] if isinstance(why, str) else
                     [(cid, score, w) for (cid, score), w in zip(ids_scores(chunks), why)])
    # dict literals in CHUNK_KEYS order (a test holds every record to it): this runs once per input chunk
    out = placed + [
        {"id": cid, "input_index": input_index[cid], "rank": rank_of[cid], "score": score,
         "outcome": "dropped", "reason": why, "position": None, "section": None, "tokens": None,
         "merged_into": None} for cid, score, why in left_out]
    if cuts:  # pruned, then left out (the budget): the reason is why it was left out, the key says it was cut
        mark_pruned(out[len(placed):], cuts, reason=False)
    out += [{"id": m.id, "input_index": m.index, "rank": None, "score": None, "outcome": "dropped",
             "reason": m.reason, "position": None, "section": None, "tokens": None, "merged_into": m.kept_index}
            for m in merged]
    ordered: list[dict[str, Any]] = [{}] * len(out)
    for r in out:  # input indexes are exactly 0..n-1: place, don't sort
        ordered[r["input_index"]] = r
    return ordered


def _dropped(input_index: Mapping[str, int], dropped: list[tuple[Chunk, str]], runs: list[Run],
             merged: list[Merged]) -> list[dict[str, Any]]:
    """``DebugInfo.dropped`` without the per-chunk records: id, input index and reason of each chunk
    left out, in input order (what :func:`_records` says of them)."""
    left = [(input_index[c.id], c.id, why) for c, why in dropped]
    for chunks, why in runs:  # one reason for all, or one each
        names = ids(chunks)
        left += ([(input_index[cid], cid, why) for cid in names] if isinstance(why, str) else
                 [(input_index[cid], cid, w) for cid, w in zip(names, why)])
    left += [(m.index, m.id, m.reason) for m in merged]
    left.sort(key=itemgetter(0))  # input indexes are distinct
    return [{"id": cid, "input_index": at, "reason": why} for at, cid, why in left]


def mark_pruned(records: list[dict[str, Any]], cuts: Sequence[Mapping[str, Any]], *, reason: bool = True) -> None:
    """Give the records of the chunks pruning cut their pruning record (:data:`PRUNED_KEY`) and, with
    ``reason``, a reason that starts with what the cut kept: "pruned to K of N characters, fits".
    ``records`` must not hold a merged duplicate's (it shares its id with the chunk kept)."""
    by_id = {c["id"]: c for c in cuts}
    for r in records:
        if (cut := by_id.get(r["id"])) is None:
            continue
        r[PRUNED_KEY] = {k: v for k, v in cut.items() if k != "id"}
        if reason:
            r["reason"] = _pruned_reason(cut, r["reason"])


def _pruned_reason(cut: Mapping[str, Any], reason: str) -> str:
    """The reason of a placed chunk pruning cut: what it kept, then how it went in.

    >>> cut = {"original_chars": 1189, "kept_chars": 59}
    >>> _pruned_reason(cut, "fits whole")
    'pruned to 59 of 1,189 characters, fits'
    >>> _pruned_reason(cut, "cut at a token boundary to fit")
    'pruned to 59 of 1,189 characters, then cut at a token boundary to fit'
    """
    kept = f"pruned to {cut['kept_chars']:,} of {cut['original_chars']:,} characters"
    return f"{kept}, fits" if reason == _REASON["whole"] else f"{kept}, then {reason}"


def _summary_reason(chunk: Chunk) -> str:
    """Why a chunk went in as its summary: a given one, or one the pack wrote (extractive, LLM)."""
    source = chunk.meta.get("summary_source")
    return _WRITTEN.get(source, _REASON["summary"]) if isinstance(source, str) else _REASON["summary"]
