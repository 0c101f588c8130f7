"""``pack()``: query + retrieved chunks → the prompt an LLM should see. Wiring only.

score → limit → fit (budget) → place (order) → render (layout) → re-encode and trim.

>>> p = pack("Which city is the capital of France?",
...          [{"id": "a", "text": "Paris is the capital of France.", "score": 0.9},
...           {"id": "b", "text": "Lyon is known for its food.", "score": 0.2},
...           {"id": "c", "text": "France is in Europe.", "score": 0.5}],
...          budget=300, layout="paper")
>>> p.debug_info.order, p.debug_info.prompt_tokens <= 300  # best first, second best last
(['a', 'b', 'c'], True)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .chunk import Chunk, Merged, normalize
from .errors import BudgetError, ConfigError, InputError
from .layout import Item, Layout, Rendered, RenderInput, get_layout
from .order import place, resolve
from .score import Scorer, get_scorer
from .select import Fit, check_positive, fit, limit
from .tokens import Tokenizer, get_tokenizer

FORMATS = ("text", "json", "openai", "anthropic")
TRUNCATION_MARK = " [...]"


@dataclass
class DebugInfo:
    """Where every chunk went and why, and what the prompt costs."""

    order: list[str]
    section_A_ids: list[str]
    section_B_ids: list[str]
    section_C_ids: list[str]
    sections: dict[str, list[str]]
    placed: list[str]
    summarized: list[str]
    truncated: list[str]
    dropped: list[dict[str, Any]]
    chunks: list[dict[str, Any]]
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Packed:
    """The result of :func:`pack`: the prompt, its chat messages and the debug info.

    Unpacks as ``prompt, debug_info = pack(...)``.
    """

    prompt: str
    rendered: Rendered = field(repr=False)
    debug_info: DebugInfo

    def __iter__(self):  # noqa: ANN204
        return iter((self.prompt, self.debug_info))

    def messages(self, format: str = "openai") -> Any:
        """Chat messages: ``openai`` → a list of role/content dicts; ``anthropic`` → ``{system, messages}``."""
        system, user = self.rendered.system, self.rendered.user
        if format == "openai":
            head = [{"role": "system", "content": system}] if system else []
            return [*head, {"role": "user", "content": user}]
        if format == "anthropic":
            out: dict[str, Any] = {"messages": [{"role": "user", "content": user}]}
            if system:
                out = {"system": system, **out}
            return out
        raise ConfigError(f"unknown message format {format!r}; choose one of: openai, anthropic")

    def to_dict(self, messages_format: str = "openai") -> dict[str, Any]:
        return {"prompt": self.prompt, "messages": self.messages(messages_format), "debug_info": self.debug_info.to_dict()}


@dataclass(frozen=True)
class _Request:
    query: str
    system: str | None
    profile: str | None
    instructions: str | None
    expected_output: str | None
    high_importance_k: int
    query_aware: bool


def rank(
    query: str, chunks: Sequence[Chunk], scorer: str | Scorer | None = None, *, rescore: bool = False
) -> tuple[list[Chunk], str]:
    """Chunks best first (ties keep input order), scoring them when asked or when scores are missing.

    Returns the ranked chunks (with the scores used) and the name of what ranked them.
    """
    missing = [c.id for c in chunks if c.score is None]
    use = None if scorer in (None, "given") else get_scorer(scorer)
    if use is not None and (rescore or missing):
        scores = use.score(query, [_scored_text(c) for c in chunks])
        chunks = [replace(c, score=float(s)) for c, s in zip(chunks, scores)]
        by = use.name
    elif missing and len(missing) < len(chunks):
        raise InputError(
            f"scores must be given for every chunk or for none, but chunk {missing[0]!r} has none; "
            "pass scorer='bm25' (CLI: --scorer bm25) to score them all"
        )
    elif missing:
        return list(chunks), "input order"
    else:
        by = "given"
    order = sorted(range(len(chunks)), key=lambda i: (-(chunks[i].score or 0.0), i))
    return [chunks[i] for i in order], by


def _scored_text(c: Chunk) -> str:
    """What a scorer reads: the record key (``meta.key``, as in the ``kv`` layout), title and text."""
    key = c.meta.get("key")
    return "\n".join(part for part in (key if isinstance(key, str) else None, c.title, c.text) if part)


def pack(
    query: str,
    chunks: Iterable[Chunk | dict[str, Any] | str],
    *,
    budget: int | None = None,
    tokenizer: str | Tokenizer = "cl100k_base",
    order: str = "edges",
    layout: str | Layout = "sections",
    scorer: str | Scorer | None = None,
    rescore: bool = False,
    top_k: int | None = None,
    min_score: float | None = None,
    word_count_threshold: int | None = None,
    min_truncated_tokens: int = 32,
    high_importance_k: int = 8,
    system: str | None = None,
    profile: str | None = None,
    instructions: str | None = None,
    expected_output: str | None = None,
    trim_profile: bool = False,
    key_id: str | None = None,
    query_aware: bool = False,
    prune: float | None = None,
    prune_relative: bool = False,
    summaries: str = "given",
    summary_tokens: int = 60,
) -> Packed:
    """Pack ``chunks`` for ``query`` into at most ``budget`` tokens of prompt.

    ``budget`` counts the whole rendered prompt (and, separately, the contents of the chat
    messages), re-encoded with ``tokenizer``. ``order`` is a placement strategy (``edges``,
    ``edges-mirror``, ``relevance``, ``reverse``, ``original``, ``middle-boost``, ``position:K``,
    ``calibrated:PROFILE.json``); ``layout`` a renderer (``sections``, ``layered``, ``paper``,
    ``kv``, ``template:FILE``). Chunks without scores are ranked by input order, or by ``scorer``.

    ``prune`` (a threshold in [0, 1]) keeps only the sentences of each chunk that help the query
    (relative to the chunk's best sentence with ``prune_relative``); ``summaries="auto"`` writes an
    extractive summary of at most ``summary_tokens`` tokens for chunks past the key facts that have
    no ``meta.summary``. Both use the MiniLM sentence model with the ``models`` extra installed,
    and a lexical model otherwise.
    """
    if not isinstance(query, str):
        raise InputError(f"query must be a string, but got {type(query).__name__}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0):
        raise InputError(f"budget must be an integer > 0, but got {budget!r}")
    check_positive("top_k", top_k)
    check_positive("word_count_threshold", word_count_threshold)
    if isinstance(min_truncated_tokens, bool) or not isinstance(min_truncated_tokens, int) or min_truncated_tokens < 1:
        raise InputError(f"min_truncated_tokens must be an integer >= 1, but got {min_truncated_tokens!r}")
    if isinstance(high_importance_k, bool) or not isinstance(high_importance_k, int) or high_importance_k < 0:
        raise InputError(f"high_importance_k must be an integer >= 0, but got {high_importance_k!r}")
    if min_score is not None and (isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or not math.isfinite(min_score)):
        raise InputError(f"min_score must be a finite number, but got {min_score!r}")
    for name, value in (("system", system), ("profile", profile), ("instructions", instructions), ("expected_output", expected_output)):
        if value is not None and not isinstance(value, str):
            raise InputError(f"{name} must be a string, but got {type(value).__name__}")
    if summaries not in ("given", "auto"):
        raise InputError(f"summaries must be 'given' or 'auto', but got {summaries!r}")
    if isinstance(summary_tokens, bool) or not isinstance(summary_tokens, int) or summary_tokens < 1:
        raise InputError(f"summary_tokens must be an integer >= 1, but got {summary_tokens!r}")
    if prune is not None and (isinstance(prune, bool) or not isinstance(prune, (int, float)) or not 0 <= prune <= 1):
        raise InputError(f"prune must be a threshold in [0, 1], but got {prune!r}")
    resolve(order)  # fail on an unknown order before any work
    tok = get_tokenizer(tokenizer)
    lay = get_layout(layout)

    unique, merged = normalize(chunks)
    input_index = {c.id: i for i, c in enumerate(unique)}
    if key_id is not None and key_id not in input_index:
        raise InputError(f"key_id must name one of the chunks, but got {key_id!r}")
    ranked, ranked_by = rank(query, unique, scorer, rescore=rescore)
    if key_id is not None and order.startswith("position:"):
        # the key chunk is the subject of a position test: it goes in first, whatever its score
        ranked.sort(key=lambda c: c.id != key_id)
    kept, dropped = limit(ranked, top_k=top_k, min_score=min_score, word_count_threshold=word_count_threshold)
    final_rank = {c.id: r for r, c in enumerate(ranked)}
    head_n = high_importance_k if lay.name == "sections" else len(kept)
    pruned: list[dict[str, Any]] = []
    if prune is not None:
        kept, pruned = _prune(query, kept, prune, prune_relative)
    if summaries == "auto":
        kept = _auto_summaries(query, kept, head_n if lay.name == "sections" else 0, summary_tokens, tok)

    req = _Request(query, system, profile, instructions, expected_output, high_importance_k, query_aware)
    measure = _measurer(tok)
    empty = lay.render(_input(req, ()))
    fixed = measure(empty)
    if budget is not None and fixed > budget:
        req, empty, fixed = _trim_profile(req, lay, tok, measure, budget, fixed, trim_profile)

    def cost(item: Item) -> int:
        return tok.count(lay.block(item) + "\n")

    def render(items: list[Item], reminders: tuple[Item, ...] = ()) -> Rendered:
        by_rank = sorted(items, key=lambda it: it.rank)
        placed = place(order, len(by_rank), input_order=sorted(range(len(by_rank)), key=lambda r: input_index[by_rank[r].id]),
                       key=next((r for r, it in enumerate(by_rank) if it.id == key_id), None))
        return lay.render(_input(req, tuple(by_rank[r] for r in placed), reminders))

    # Sections layout: past the key facts, prefer summaries when the rest cannot all go in whole.
    # Tokens the joins and section headers add on top of the blocks: first estimated from a probe
    # with a tiny chunk in each section, then as measured on the last pass.
    slack = _overhead(lay, req, measure, fixed, cost, head_n) if budget is not None else 0
    passes = 0
    while True:
        available = None if budget is None else budget - fixed - slack
        chosen = _fit_two_phase(kept, head_n, available, cost, tok, min_truncated_tokens)
        chosen_items = [replace(it, rank=final_rank[it.id]) for it in chosen.items]
        rendered = render(chosen_items)
        total = measure(rendered)
        passes += 1
        if budget is None or total <= budget:
            break
        if passes < 4:
            slack = max(slack + 1, total - fixed - chosen.used)
            continue
        # still over: give up the lowest-ranked chunk, one at a time, until it fits
        while total > budget and chosen_items:
            last = chosen_items.pop()
            chosen.dropped.append((last.chunk, "did not fit once the prompt was rendered and re-encoded"))
            rendered = render(chosen_items)
            total = measure(rendered)
            passes += 1
        break
    dropped += chosen.dropped

    reminders: list[Item] = []
    if lay.name == "sections":
        for cand in [it for it in chosen_items if it.id in rendered.sections.get("A", []) and it.chunk.summary]:
            trial = render(chosen_items, (*reminders, Item(cand.chunk, "summary", cand.chunk.summary or "", cand.rank)))
            trial_total = measure(trial)
            passes += 1
            if budget is not None and trial_total > budget:
                break
            reminders.append(Item(cand.chunk, "summary", cand.chunk.summary or "", cand.rank))
            rendered, total = trial, trial_total

    return Packed(rendered.prompt, rendered, _debug(
        rendered, chosen_items, dropped, merged, unique, input_index, final_rank, tok, budget, order, lay, ranked_by, passes,
        cost, pruned,
    ))


def _overhead(lay: Layout, req: _Request, measure: Any, fixed: int, cost: Any, head_n: int) -> int:
    probe = [Item(Chunk(f"~{r}", "x"), "whole", "x", r) for r in (0, max(head_n, 2), 1)]  # A, B, C
    return max(0, measure(lay.render(_input(req, tuple(probe)))) - fixed - sum(cost(it) for it in probe))


def _fit_two_phase(kept: list[Chunk], head_n: int, available: int | None, cost: Any, tok: Tokenizer, min_truncated: int):  # noqa: ANN202
    """Fit the first ``head_n`` chunks, then the rest: whole if all of them fit, else summaries first."""
    head = fit(kept[:head_n], available, cost=cost, tokenizer=tok, min_truncated_tokens=min_truncated)
    tail = kept[head_n:]
    if not tail:
        return head
    left = None if available is None else available - head.used
    prefer = left is not None and any(c.summary for c in tail) and sum(
        cost(Item(c, "whole", c.text, 0)) for c in tail
    ) > left
    rest = fit(tail, left, cost=cost, tokenizer=tok, min_truncated_tokens=min_truncated, prefer_summary=prefer)
    return Fit(head.items + rest.items, head.dropped + rest.dropped, head.used + rest.used)


def _prune(query: str, chunks: list[Chunk], threshold: float, relative: bool) -> tuple[list[Chunk], list[dict[str, Any]]]:
    """Each chunk cut to the sentences that help the query; a record for each one that lost text."""
    from .prune import prune_chunk

    out, records = [], []
    for chunk in chunks:
        result = prune_chunk(query, chunk, threshold, relative=relative)
        if result.text != chunk.text:
            chunk = result.apply(chunk)
            records.append({"id": chunk.id, "original_chars": chunk.meta["prune"]["original_chars"],
                            "kept_chars": len(chunk.text), "score": chunk.meta["prune"]["score"]})
        out.append(chunk)
    return out, records


def _auto_summaries(query: str, chunks: list[Chunk], skip: int, max_tokens: int, tok: Tokenizer) -> list[Chunk]:
    """Extractive summaries for the chunks past the first ``skip`` that have none of their own."""
    from .prune import extractive_summary

    out = list(chunks[:skip])
    for chunk in chunks[skip:]:
        if chunk.summary is None and tok.count(chunk.text) > max_tokens:
            text = extractive_summary(query, chunk, max_tokens, tok)
            if text:
                chunk = replace(chunk, meta={**chunk.meta, "summary": text, "summary_source": "extractive"})
        out.append(chunk)
    return out


def _input(req: _Request, items: tuple[Item, ...], reminders: tuple[Item, ...] = ()) -> RenderInput:
    return RenderInput(
        query=req.query, items=items, system=req.system, profile=req.profile, instructions=req.instructions,
        expected_output=req.expected_output, high_importance_k=req.high_importance_k, reminders=reminders,
        query_aware=req.query_aware,
    )


def _measurer(tok: Tokenizer):  # noqa: ANN202
    def measure(r: Rendered) -> int:
        """The larger of the prompt's count and the sum over its message contents."""
        return max(_prompt_tokens(tok, r), tok.count(r.system) + _user_tokens(tok, r))

    return measure


def _user_tokens(tok: Tokenizer, r: Rendered) -> int:
    return tok.count_parts(r.user_parts) if r.user_parts else tok.count(r.user)


def _prompt_tokens(tok: Tokenizer, r: Rendered) -> int:
    """Tokens of ``r.prompt``, from cached counts of its pieces (system, blocks) where exact."""
    if not r.system:
        return _user_tokens(tok, r)
    return tok.count_parts((r.system + "\n\n", *(r.user_parts or (r.user,))))


def _trim_profile(req: _Request, lay: Layout, tok: Tokenizer, measure: Any, budget: int, fixed: int, trim: bool):  # noqa: ANN202
    need = f"the fixed layers (system, instructions, profile, question) need {fixed} tokens, but budget is {budget}"
    if not trim or not req.profile:
        hint = "; pass trim_profile=True (CLI: --trim-profile) to shorten the profile" if req.profile and not trim else ""
        raise BudgetError(f"budget must hold the fixed layers: {need}{hint}")
    profile = req.profile
    while True:
        over = fixed - budget
        keep = tok.count(profile) - over - tok.count(TRUNCATION_MARK)
        if keep <= 0:
            raise BudgetError(f"budget must hold the fixed layers even with the profile trimmed away: {need}")
        profile = tok.truncate(profile, keep)
        req = replace(req, profile=profile + TRUNCATION_MARK)
        empty = lay.render(_input(req, ()))
        fixed = measure(empty)
        if fixed <= budget:
            return req, empty, fixed


def _debug(
    rendered: Rendered, items: list[Item], dropped: list[tuple[Chunk, str]], merged: list[Merged],
    unique: list[Chunk], input_index: dict[str, int], final_rank: dict[str, int], tok: Tokenizer,
    budget: int | None, order: str, lay: Layout, ranked_by: str, passes: int, cost: Any,
    pruned: list[dict[str, Any]],
) -> DebugInfo:
    prompt_tokens = _prompt_tokens(tok, rendered)
    message_tokens = tok.count(rendered.system) + _user_tokens(tok, rendered)
    position = {cid: p for p, cid in enumerate(rendered.order)}
    section_of = {cid: name for name, ids in rendered.sections.items() for cid in ids}
    outcome = {"whole": "placed", "summary": "summarized", "truncated": "truncated"}
    reasons = {"whole": "fits whole", "summary": "given summary fits where the whole chunk does not",
               "truncated": "cut at a token boundary to fit"}
    by_id = {c.id: c for c in unique}
    records: list[dict[str, Any]] = []
    for it in items:
        records.append({
            "id": it.id, "input_index": input_index[it.id], "rank": final_rank[it.id], "score": by_id[it.id].score,
            "outcome": outcome[it.form], "position": position.get(it.id),
            "reason": "extractive summary fits where the whole chunk does not"
            if it.form == "summary" and it.chunk.meta.get("summary_source") == "extractive" else reasons[it.form],
            "section": section_of.get(it.id), "tokens": cost(it),
        })
    for chunk, why in dropped:
        records.append({"id": chunk.id, "input_index": input_index[chunk.id], "rank": final_rank[chunk.id],
                        "score": chunk.score, "outcome": "dropped", "reason": why})
    for m in merged:
        records.append({"id": m.id, "input_index": m.index, "rank": None, "score": None,
                        "outcome": "dropped", "reason": m.reason})
    records.sort(key=lambda r: r["input_index"])
    of = lambda kind: [r["id"] for r in records if r["outcome"] == kind]  # noqa: E731
    total = max(prompt_tokens, message_tokens)
    return DebugInfo(
        order=list(rendered.order),
        section_A_ids=rendered.sections.get("A", []),
        section_B_ids=rendered.sections.get("B", []),
        section_C_ids=rendered.sections.get("C", []),
        sections=rendered.sections,
        placed=of("placed"), summarized=of("summarized"), truncated=of("truncated"),
        dropped=[{"id": r["id"], "reason": r["reason"]} for r in records if r["outcome"] == "dropped"],
        chunks=records,
        reminders=list(rendered.reminder_ids),
        pruned=pruned,
        prompt_tokens=prompt_tokens,
        message_tokens=message_tokens,
        budget=budget,
        remaining_tokens=None if budget is None else budget - total,
        tokenizer=tok.name,
        estimated=tok.estimated,
        cache_prefix_tokens=tok.count_prefix(rendered.prompt, rendered.stable_chars),
        strategy=order, layout=lay.name, scorer=ranked_by, render_passes=passes,
    )


def variants(
    query: str,
    chunks: Iterable[Chunk | dict[str, Any] | str],
    key_id: str,
    positions: Sequence[str | int] = ("first", "middle", "last"),
    *,
    layout: str | Layout = "layered",
    **options: Any,
) -> dict[str, Packed]:
    """One packed prompt per position of the key chunk: the position-sensitivity test.

    The key chunk is always selected; the others keep their input order around it. Uses a flat
    layout (``layered``) by default, so the position is the key chunk's place among the documents.

    >>> v = variants("q", ["a", "b", "c"], key_id="chunk-2", tokenizer="words", layout="paper")
    >>> {name: p.debug_info.order for name, p in v.items()}
    {'first': ['chunk-2', 'chunk-0', 'chunk-1'], 'middle': ['chunk-0', 'chunk-2', 'chunk-1'], 'last': ['chunk-0', 'chunk-1', 'chunk-2']}
    """
    items = list(chunks)
    if "order" in options:
        raise InputError("variants sets the order itself (position:P); do not pass order=")
    return {str(p): pack(query, items, key_id=key_id, order=f"position:{p}", layout=layout, **options) for p in positions}
