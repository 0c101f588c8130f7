"""The budget loop: fit ranked chunks into what the fixed layers leave, render, re-encode, settle.

Selection must know what rendering costs, so the loop (1) measures the fixed layers (system,
instructions, profile, question) once, (2) estimates the tokens that section headers and joins add
from a probe, (3) fits chunks in rank order against what is left (:func:`edgewise.packing.select.fit`),
(4) renders and re-encodes the whole prompt, and (5) if token merges at the joins pushed it over,
tightens the estimate and tries again, dropping the lowest-ranked chunk as a last resort.

Layout-specific policy is asked of the layout through :mod:`edgewise.layout.hooks`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from ..chunk import Chunk
from ..errors import BudgetError
from ..layout import Item, Layout, Rendered, RenderInput, hooks
from ..tokens.cache import split_is_clean
from ..tokens.tokenizers import Bounded, Tokenizer
from . import fast
from .select import Bounds, Fit, Run, fit

TRUNCATION_MARK = " [...]"
MAX_ESTIMATE_PASSES = 4


@dataclass(frozen=True)
class Layers:
    """The fixed layers of a prompt: what is rendered whatever the chunks."""

    query: str
    system: str | None = None
    profile: str | None = None
    instructions: str | None = None
    expected_output: str | None = None
    high_importance_k: int = 8
    query_aware: bool = False

    def input(self, items: tuple[Item, ...] = (), reminders: tuple[Item, ...] = ()) -> RenderInput:
        return RenderInput(
            query=self.query, items=items, system=self.system, profile=self.profile, instructions=self.instructions,
            expected_output=self.expected_output, high_importance_k=self.high_importance_k, reminders=reminders,
            query_aware=self.query_aware,
        )


class BlockCosts:
    """What each item's block adds to the prompt (the block and its line break), rendered and
    counted once per pack: fitting, re-fitting after a render and the debug record ask again.

    Keyed by chunk id, form and text (ids are unique within a pack); a block does not depend on the
    item's rank, which :func:`edgewise.packing.select.fit` numbers differently from the final render.
    """

    def __init__(self, lay: Layout, tok: Tokenizer) -> None:
        self._block, self._count = lay.block, tok.count
        self._memo: dict[tuple[str, str, str], int] = {}

    def __call__(self, item: Item) -> int:
        key = (item.chunk.id, item.form, item.text)
        n = self._memo.get(key)
        if n is None:
            n = self._memo[key] = self._count(self._block(item) + "\n")
        return n


class Meter:
    """Counts a rendered prompt: the larger of the prompt's tokens and its message contents' tokens."""

    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self._stable = tok.count_stable if isinstance(tok, fast.PackCounts) else tok.count
        self.split_proven = bool(getattr(tok, "split_proven", False))  # declared by ExactCounts and PackCounts
        self._last: tuple[Rendered | None, int] = (None, 0)  # the last prompt's user tokens: asked 2-4 times

    def __call__(self, r: Rendered) -> int:
        return max(self.prompt_tokens(r), self.message_tokens(r))

    def user_tokens(self, r: Rendered) -> int:
        last, n = self._last
        if last is not r:
            n = self.tok.count_parts(r.user_parts) if r.user_parts else self.tok.count(r.user)
            self._last = (r, n)
        return n

    def message_tokens(self, r: Rendered) -> int:
        return self._stable(r.system) + self.user_tokens(r)

    def prompt_tokens(self, r: Rendered) -> int:
        """Tokens of ``r.prompt``, from cached counts of its pieces (system, blocks) where exact."""
        if not r.system:
            return self.user_tokens(r)
        head = r.system + "\n\n"
        if self.split_proven and split_is_clean(head, r.user_parts[0] if r.user_parts else r.user):
            return self._stable(head) + self.user_tokens(r)
        return self.tok.count_parts((head, *(r.user_parts or (r.user,))))


def reserve(layers: Layers, lay: Layout, meter: Meter, budget: int | None, trim_profile: bool) -> tuple[Layers, int]:
    """Tokens the fixed layers take; with ``trim_profile``, the profile is cut until they fit."""
    fixed = meter(hooks.render_fixed(lay, layers.input()))
    if budget is None or fixed <= budget:
        return layers, fixed
    need = f"the fixed layers (system, instructions, profile, question) need {fixed} tokens, but budget is {budget}"
    if not trim_profile or not layers.profile:
        hint = "; pass trim_profile=True (CLI: --trim-profile) to shorten the profile" if layers.profile and not trim_profile else ""
        raise BudgetError(f"budget must hold the fixed layers: {need}{hint}")
    tok, profile = meter.tok, layers.profile
    while fixed > budget:
        keep = tok.count(profile) - (fixed - budget) - tok.count(TRUNCATION_MARK)
        if keep <= 0:
            raise BudgetError(f"budget must hold the fixed layers even with the profile trimmed away: {need}")
        profile = tok.truncate(profile, keep)
        layers = replace(layers, profile=profile + TRUNCATION_MARK)
        fixed = meter(hooks.render_fixed(lay, layers.input()))
    return layers, fixed


@dataclass
class Settled:
    """What the loop settled on: the items (rank order), the prompt, its size, who was left out."""

    items: list[Item]
    rendered: Rendered
    total: int
    dropped: list[tuple[Chunk, str]]
    passes: int
    runs: list[Run] = field(default_factory=list)  # left out together (see select.Fit)


Render = Callable[[list[Item], tuple[Item, ...]], Rendered]


def settle(
    kept: Sequence[Chunk], *, rank_of: Mapping[str, int] | None, head_n: int, budget: int | None, fixed: int, lay: Layout,
    layers: Layers, meter: Meter, render: Render, min_truncated_tokens: int, cost: Callable[[Item], int] | None = None,
) -> Settled:
    """Fit ``kept`` (best first) under ``budget``, then add the layout's reminders while they fit.

    ``rank_of`` gives each chunk's rank among all ranked chunks (what the layout sees as ``rank``;
    None when ``kept`` are all the ranked chunks, in rank order);
    ``cost`` prices an item's block (default: a fresh :class:`BlockCosts`).
    """
    tok = meter.tok
    if cost is None:
        cost = BlockCosts(lay, tok)

    # a block holds its text's words: they bound its cost from below (see hooks.keeps_text_words)
    bound = tok.lower_bound if hooks.keeps_text_words(lay) and isinstance(tok, Bounded) else None
    bounds = Bounds(bound, hooks.tags_bound(lay, tok))
    skip = fast.FastPaths.of(lay, tok)

    # tokens the joins and section headers add on top of the blocks: first estimated from a probe
    # with a tiny chunk in each section, then as measured on the last pass
    slack = _overhead(lay, layers, meter, fixed, cost, head_n) if budget is not None else 0
    passes = 0
    while True:
        available = None if budget is None else budget - fixed - slack
        chosen = fit_two_phase(kept, head_n, available, cost, tok, min_truncated_tokens, bounds, skip)
        # the layout sees each chunk's rank among all ranked chunks (fit numbered the kept ones)
        items = chosen.items if rank_of is None else [
            it if it.rank == rank_of[it.chunk.id] else Item(it.chunk, it.form, it.text, rank_of[it.chunk.id])
            for it in chosen.items]
        rendered = render(items, ())
        total = meter(rendered)
        passes += 1
        if budget is None or total <= budget:
            break
        if passes < MAX_ESTIMATE_PASSES:
            slack = max(slack + 1, total - fixed - chosen.used)
            continue
        while total > budget and items:  # still over: give up the lowest-ranked chunk, one at a time
            last = items.pop()
            chosen.dropped.append((last.chunk, "did not fit once the prompt was rendered and re-encoded"))
            rendered = render(items, ())
            total = meter(rendered)
            passes += 1
        break
    reminders: tuple[Item, ...] = ()
    for cand in hooks.reminder_candidates(lay, rendered, items):
        trial = render(items, (*reminders, cand))
        trial_total = meter(trial)
        passes += 1
        if budget is not None and trial_total > budget:
            break
        reminders, rendered, total = (*reminders, cand), trial, trial_total
    return Settled(items, rendered, total, chosen.dropped, passes, chosen.runs)


def _overhead(lay: Layout, layers: Layers, meter: Meter, fixed: int, cost: Callable[[Item], int], head_n: int) -> int:
    """The first estimate of what section headers and joins add to the blocks, from a probe with a
    tiny chunk in each section (kept per layout, layers and tokenizer by the fast paths, where it
    cannot depend on the query)."""
    measure = partial(_measure_overhead, lay, layers, meter, fixed, cost, head_n)
    if fast.ENABLED and meter.split_proven and hooks.renders_by_name(lay):
        return fast.counts.remembered_overhead((lay.name, replace(layers, query=""), meter.tok.name, head_n), measure)
    return measure()


def _measure_overhead(lay: Layout, layers: Layers, meter: Meter, fixed: int, cost: Callable[[Item], int],
                      head_n: int) -> int:
    probe = [Item(Chunk(f"~{r}", "x"), "whole", "x", r) for r in (0, max(head_n, 2), 1)]  # A, B, C
    return max(0, meter(lay.render(layers.input(tuple(probe)))) - fixed - sum(cost(it) for it in probe))


def fit_two_phase(
    kept: Sequence[Chunk], head_n: int, available: int | None, cost: Callable[[Item], int], tok: Tokenizer,
    min_truncated: int, bounds: Bounds | None = None, skip: fast.FastPaths | None = None,
) -> Fit:
    """Fit the first ``head_n`` chunks, then the rest: whole if all of them fit, else summaries first."""
    head = fit(kept[:head_n], available, cost=cost, tokenizer=tok, min_truncated_tokens=min_truncated,
               bounds=bounds, fast=skip)
    tail = kept[head_n:]
    if not tail:
        return head
    left = None if available is None else available - head.used
    prefer = left is not None and fast.has_summaries(tail) and _exceeds(tail, left, cost, bounds and bounds.text)
    rest = fit(tail, left, cost=cost, tokenizer=tok, min_truncated_tokens=min_truncated, prefer_summary=prefer,
               first_rank=head_n, bounds=bounds, fast=skip)
    return Fit(head.items + rest.items, head.dropped + rest.dropped, head.used + rest.used, head.runs + rest.runs)


def _exceeds(chunks: Sequence[Chunk], left: int, cost: Callable[[Item], int],
             bound: Callable[[str, int], int] | None) -> bool:
    """Whether the chunks' whole blocks together cost more than ``left``: by their lower bounds if
    those already say so, else by exact costs, stopping as soon as the sum passes ``left``."""
    if bound is not None:
        total = 0
        for c in chunks:
            total += bound(c.text, left - total)
            if total > left:
                return True
    total = 0
    for c in chunks:
        total += cost(Item(c, "whole", c.text, 0))
        if total > left:
            return True
    return False
