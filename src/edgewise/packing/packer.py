"""``Packer``: a long-lived packer for the request path (servers, batch workers).

It resolves its tokenizer and scorer once and keeps them (with their caches and loaded models);
``pack(query, chunks)`` then runs the pipeline per request without reloading anything, and is safe
to call from many threads at once. :func:`edgewise.pack` is a call on a shared default ``Packer``.

>>> packer = Packer(budget=300, layout="paper", tokenizer="words")
>>> packer.pack("capital of France?", [{"id": "a", "text": "Paris.", "score": 1.0}]).debug_info.order
['a']
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from ..checks import check_str
from ..chunk import Chunk, Merged, normalize_indexed
from ..errors import BudgetError, ConfigError, InputError
from ..layout import Item, Layout, Rendered, get_layout, hooks
from ..options import DEFAULT_TOKENIZER, PackOptions
from ..order import place, resolve, slot_index
from ..order.profiles import choose
from ..prune.steps import prune_step
from ..prune.summaries import Summarizers, summary_step
from ..score import Scorer, get_scorer
from ..score.ranking import rank
from ..tokens.tokenizers import Tokenizer, get_tokenizer
from . import debug, fast
from .budget import BlockCosts, Layers, Meter, reserve, settle
from .debug import DebugInfo
from .select import limit


@dataclass
class Packed:
    """The result of :func:`pack`: the prompt, its chat messages and the debug info.

    Unpacks as ``prompt, debug_info = pack(...)``.
    """

    prompt: str
    rendered: Rendered = field(repr=False)
    debug_info: DebugInfo
    #: the chunks in the prompt, in prompt order, each in the form and with the text it was given
    #: there (whole, pruned, summary or cut): what a framework component hands back as documents
    items: tuple[Item, ...] = field(default=(), repr=False)

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


class Packer:
    """Holds the options and the loaded tokenizer and scorers; call :meth:`pack` per request."""

    def __init__(self, options: PackOptions | Mapping[str, Any] | None = None, *, preload: bool = True,
                 **overrides: Any) -> None:
        self.options = _options(options).replace(**overrides)
        self._lock = threading.Lock()
        self._scorers: dict[str, Scorer] = {}
        self.summarizers = Summarizers()  # summaries="llm": the summariser of each set of summary options
        if preload:
            self.preload()

    def preload(self) -> None:
        """Resolve what the options name now (loading the tokenizer and any scorer model), so a bad
        name fails at construction, not on the first request (the options of ``summaries="llm"`` are
        checked too; its model loads when a summary is first needed). An exact tokenizer switches to its
        fastest installed counter here (``TiktokenTokenizer.speed_up``: quicktok with the ``fast``
        extra, a one-time load), so that no ``pack()`` call pays it."""
        if (speed_up := getattr(self.tokenizer(self.options), "speed_up", None)) is not None:
            speed_up()
        self.scorer(self.options)
        self.layout(self.options)
        resolve(self.options.order)
        self.summarizers.check(self.options)  # checked, not loaded: a model loads when a summary is first needed

    def __repr__(self) -> str:
        return f"Packer({', '.join(f'{k}={v!r}' for k, v in self.options.to_dict(changed_only=True).items())})"

    # -- resources, resolved once ---------------------------------------------------------------

    def tokenizer(self, opts: PackOptions) -> Tokenizer:
        """The tokenizer that counts ``opts``' prompt: ``tokenizer``, else the model's, else cl100k_base."""
        return get_tokenizer(tokenizer_spec(opts))  # loaded tokenizers are shared process-wide

    def layout(self, opts: PackOptions) -> Layout:
        return get_layout(opts.layout)  # cheap; file-backed layouts cache their parsed file

    def scorer(self, opts: PackOptions) -> Scorer | None:
        spec = opts.scorer
        if spec in (None, "given"):
            return None
        if not isinstance(spec, str):
            return spec
        with self._lock:
            found = self._scorers.get(spec)
        if found is None:
            found = get_scorer(spec)  # may load a model: outside the lock
            with self._lock:
                found = self._scorers.setdefault(spec, found)
        return found

    # -- the pipeline ---------------------------------------------------------------------------

    def pack(
        self, query: str, chunks: Iterable[Chunk | Mapping[str, Any] | str],
        options: PackOptions | Mapping[str, Any] | None = None, **overrides: Any,
    ) -> Packed:
        """Pack ``chunks`` for ``query``: score → prune → select → place → render → debug.

        ``options`` replaces the packer's options for this call; ``overrides`` change single ones.
        """
        return self.pack_with(query, chunks, (self.options if options is None else _options(options)).replace(**overrides))

    def pack_with(self, query: str, chunks: Iterable[Chunk | Mapping[str, Any] | str],
                  options: PackOptions | Mapping[str, Any], *, key_section: str | None = None) -> Packed:
        """Pack with exactly ``options`` (not merged with the packer's): what :meth:`pack` and
        :func:`edgewise.variants` call.

        ``key_section`` is where the key chunk of a position test (``order="position:..."`` with a
        ``key_id``) goes in a layout with sections (``sections``): ``"B"`` keeps it out of the key
        facts (Sections A and C), so it sits only in the extended context; ``"A"`` and ``"C"`` leave
        it among the key facts, where the order puts it (the default).

        >>> packer = Packer(tokenizer="words", high_importance_k=2)
        >>> opts = packer.options.replace(key_id="a", order="position:middle")
        >>> chunks = [{"id": i, "text": i, "score": 1.0} for i in "abcd"]
        >>> packer.pack_with("q", chunks, opts).debug_info.sections
        {'A': ['b', 'a'], 'B': ['c', 'd'], 'C': []}
        >>> packer.pack_with("q", chunks, opts, key_section="B").debug_info.sections
        {'A': ['b'], 'B': ['a', 'c', 'd'], 'C': []}
        """
        opts = _options(options)
        _check_key_section(opts, key_section)
        check_str("query", query)
        if opts.model is not None:
            opts = for_model(opts)
        shared, lay, scorer = self.tokenizer(opts), self.layout(opts), self.scorer(opts)
        tok = fast.counts_for(shared)  # this pack's counts
        resolve(opts.order)  # an unknown order fails before any work
        ranking = _rank_and_limit(query, chunks, opts, scorer)
        placement = None
        if opts.order == "auto":  # the model's measured profile (and the pruning it measured to pay), or edges
            placement = choose(opts.model, lay.name, len(ranking.kept))
            opts = opts.replace(order=placement.order)
            if placement.prune is not None and opts.prune is None:
                opts = opts.replace(prune=placement.prune)

        # prune, summarise
        key_facts = hooks.key_facts(lay, opts.high_importance_k)
        kept, pruned = ranking.kept, []
        if opts.prune is not None:
            kept, pruned = prune_step(query, kept, opts.prune, relative=opts.prune_relative, scorer=opts.prune_scorer)
        if opts.summaries == "auto":
            kept = summary_step(query, kept, skip=key_facts or 0, max_tokens=opts.summary_tokens, tok=tok,
                                scorer=opts.prune_scorer)

        # select under the budget, place, render (summaries="llm": the summaries selection asks for first)
        layers = Layers(query, opts.system, opts.profile, opts.instructions, opts.expected_output,
                        opts.high_importance_k, opts.query_aware)
        meter = Meter(tok)
        layers, fixed = reserve(layers, lay, meter, opts.budget, opts.trim_profile)
        cost = BlockCosts(lay, tok)
        fit = partial(settle, rank_of=ranking.rank_of, head_n=len(kept) if key_facts is None else key_facts,
                      budget=opts.budget, fixed=fixed, lay=lay, layers=layers, meter=meter,
                      render=_renderer(opts, lay, layers, ranking, key_section),
                      min_truncated_tokens=opts.min_truncated_tokens, cost=cost)
        # summarised: a record per LLM summary written (None unless summaries="llm")
        settled, summarised = self.summarizers.select(query, kept, opts, skip=key_facts or 0, tok=tok, fit=fit)
        rendered = settled.rendered
        info = debug.build(debug.PackTrace(
            rendered=rendered, items=settled.items, dropped=ranking.dropped + settled.dropped, runs=settled.runs,
            merged=ranking.merged, input_index=ranking.input_index, ranked=ranking.ranked, cost=cost,
            prompt_tokens=meter.prompt_tokens(rendered), message_tokens=meter.message_tokens(rendered),
            cache_prefix_tokens=tok.count_prefix(rendered.prompt, rendered.stable_chars), budget=opts.budget,
            tokenizer=tok.name, estimated=tok.estimated, strategy=opts.order, layout=lay.name, scorer=ranking.ranked_by,
            passes=settled.passes, pruned=pruned, summaries=summarised,
            placement=None if placement is None else placement.to_dict(applied_prune=opts.prune),
        ))
        at = {it.id: it for it in settled.items}
        return Packed(rendered.prompt, rendered, info, tuple(at[i] for i in rendered.order if i in at))


@dataclass
class _Ranking:
    """The chunks of one pack ranked and limited: what pruning and selection start from."""

    ranked: Sequence[Chunk]  # every unique chunk, best first
    input_index: Mapping[str, int]  # id -> position in the caller's input
    ranked_by: str  # the scorer's name, or how the given order was read
    kept: Sequence[Chunk]  # what the limits (top_k, min_score, word_count_threshold) kept, best first
    dropped: list[tuple[Chunk, str]]  # what they dropped, with the reasons
    merged: list[Merged]  # duplicates folded into a kept chunk
    rank_of: dict[str, int] | None  # id -> rank (None: the ranks are the positions in ``kept``)
    n_input: int  # unique input chunks (what a position test's K counts)


def _rank_and_limit(query: str, chunks: Iterable[Any], opts: PackOptions, scorer: Scorer | None) -> _Ranking:
    """Score, rank and limit the chunks; the key chunk of a position test must survive the limits."""
    key_id, position_test = opts.key_id, opts.order.startswith("position:")
    lazy = None if scorer is not None or key_id is not None or _limits_or_rewrites(opts) else fast.ranked_plain(chunks)
    if lazy is not None:  # plain dicts, nothing to limit or rewrite: chunks are built when read
        ranked, input_index, ranked_by = lazy
        return _Ranking(ranked, input_index, ranked_by, ranked, [], [], None, len(ranked))
    unique, input_index, merged = normalize_indexed(chunks)
    if key_id is not None and key_id not in input_index:
        raise InputError(f"key_id must name one of the chunks, but got {key_id!r}")
    if position_test and key_id is not None:
        slot_index(opts.order.partition(":")[2], len(unique))  # K counts the input chunks
    ranked, ranked_by = rank(query, unique, scorer, rescore=opts.rescore)
    if key_id is not None and position_test:  # the subject of a position test goes in first, whatever its score
        ranked.sort(key=lambda c: c.id != key_id)
    kept, dropped = limit(ranked, top_k=opts.top_k, min_score=opts.min_score,
                          word_count_threshold=opts.word_count_threshold)
    if key_id is not None and position_test and key_id not in {c.id for c in kept}:
        why = next(w for c, w in dropped if c.id == key_id)
        raise InputError(f"order {opts.order!r} needs the key chunk {key_id!r} in the prompt, but it was dropped: {why}")
    return _Ranking(ranked, input_index, ranked_by, kept, dropped, merged, {c.id: r for r, c in enumerate(ranked)},
                    len(unique))


def _renderer(opts: PackOptions, lay: Layout, layers: Layers, ranking: _Ranking,
              key_section: str | None) -> Callable[[list[Item], tuple[Item, ...]], Rendered]:
    """What selection calls to render a choice of items: placed by the order, in the layout."""
    key_id, position_test = opts.key_id, opts.order.startswith("position:")
    input_index = ranking.input_index

    def render(items: list[Item], reminders: tuple[Item, ...]) -> Rendered:
        by_rank = sorted(items, key=lambda it: it.rank)
        key = next((r for r, it in enumerate(by_rank) if it.id == key_id), None)
        if position_test and key_id is not None:
            _check_position(opts, key, len(by_rank), ranking.n_input)
            if key_section == "B":  # not a key fact: the layout puts it with the extended context
                by_rank[key] = replace(by_rank[key], rank=len(ranking.ranked))
        placed = place(opts.order, len(by_rank), key=key,
                       input_order=sorted(range(len(by_rank)), key=lambda r: input_index[by_rank[r].id]))
        return lay.render(layers.input(tuple(by_rank[r] for r in placed), reminders))

    return render


def _check_key_section(opts: PackOptions, key_section: str | None) -> None:
    check_str("key_section", key_section, optional=True, choices=("A", "B", "C"))
    if key_section is not None and (opts.key_id is None or not opts.order.startswith("position:")):
        raise ConfigError(f"key_section places the key chunk of a position test, so it needs a key_id and order "
                          f"position:..., but got order {opts.order!r} and key_id {opts.key_id!r}")


def tokenizer_spec(opts: PackOptions) -> str | Tokenizer:
    """The tokenizer ``opts`` name: ``tokenizer``, else the model's, else ``cl100k_base``. A
    ``tokenizer`` that is not the model's is an error naming both.

    >>> tokenizer_spec(PackOptions(model="gpt-4o")), tokenizer_spec(PackOptions())
    ('o200k_base', 'cl100k_base')
    """
    if opts.model is None:
        return DEFAULT_TOKENIZER if opts.tokenizer is None else opts.tokenizer
    from ..catalog import get_model

    model = get_model(opts.model)
    if opts.tokenizer is None:
        return model.tokenizer
    given = opts.tokenizer if isinstance(opts.tokenizer, str) else getattr(opts.tokenizer, "name", None)
    if given != model.tokenizer:
        raise ConfigError(f"tokenizer {given!r} is not the tokenizer of model {model.name!r}, which counts with "
                          f"{model.tokenizer!r}; give the model alone, or the model's tokenizer")
    return opts.tokenizer


def for_model(opts: PackOptions) -> PackOptions:
    """``opts`` with the model resolved: its tokenizer (unless given), and its context window as the
    budget when ``budget`` is None (the whole window: pass a budget to leave room for the answer).

    >>> for_model(PackOptions(model="gpt-4")).budget, for_model(PackOptions(model="gpt-4", budget=500)).budget
    (8192, 500)
    """
    if opts.model is None:
        return opts
    from ..catalog import get_model

    window = get_model(opts.model).context_window
    return opts.replace(tokenizer=tokenizer_spec(opts), budget=window if opts.budget is None else opts.budget)


def _options(options: PackOptions | Mapping[str, Any] | None) -> PackOptions:
    if options is None:
        return PackOptions()
    if isinstance(options, PackOptions):
        return options
    return PackOptions.from_dict(options)


def _limits_or_rewrites(opts: PackOptions) -> bool:
    """Whether ``opts`` drop chunks by count or score, or rewrite them (prune, summarise)."""
    return (opts.top_k is not None or opts.min_score is not None or opts.word_count_threshold is not None
            or opts.prune is not None or opts.summaries != "given")


def _check_position(opts: PackOptions, key: int | None, n: int, n_input: int) -> None:
    """The key chunk of a position test must be in the prompt, at a slot that exists."""
    if key is None:
        raise BudgetError(f"order {opts.order!r} needs the key chunk {opts.key_id!r} in the prompt, but it did not fit "
                          f"in budget {opts.budget}; raise the budget")
    arg = opts.order.partition(":")[2]
    if arg.lstrip("-").isdigit() and int(arg) >= n:
        raise BudgetError(f"order {opts.order!r} puts the key chunk at index {arg} (counted over the {n_input} input "
                          f"chunks), but only {n} of them fit in budget {opts.budget}; raise the budget or lower K")


_DEFAULT: Packer | None = None
_DEFAULT_LOCK = threading.Lock()


def default_packer() -> Packer:
    """The shared ``Packer`` behind :func:`edgewise.pack` (default options, scorers kept across calls)."""
    global _DEFAULT
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = Packer(preload=False)
    return _DEFAULT
