"""``PackOptions``: every option of :func:`edgewise.pack`, declared once.

The library keywords, the CLI flags (:func:`add_arguments`), the evaluation conditions
(:meth:`PackOptions.from_strings`) and the JSON Schema of a request (:meth:`PackOptions.json_schema`)
are all generated from the fields below: an option is added by adding a field.

>>> opts = PackOptions(budget=500, order="relevance")
>>> opts.budget, opts.layout
(500, 'sections')
>>> PackOptions.from_dict({"budget": 500, "top_k": 3}).to_dict()["top_k"]
3
>>> PackOptions(top_k=0)
Traceback (most recent call last):
...
edgewise.errors.InputError: top_k must be > 0, but got 0
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .checks import check_bool, check_int, check_number, check_str
from .errors import ConfigError, InputError

DEFAULT_TOKENIZER = "cl100k_base"  # counts the budget when neither tokenizer nor model says otherwise

@dataclass(frozen=True)
class Spec:
    """How one option is typed, checked, documented and exposed: its ``kind`` is a key of :data:`KINDS`."""

    kind: str
    help: str
    minimum: int | None = None
    choices: tuple[str, ...] = ()
    short: str | None = None
    registry: str | None = None  # for kind "name": which registry lists the valid names
    shown_default: Any = None  # the default --help names for an option whose None means "work it out"


@dataclass(frozen=True)
class Kind:
    """What an option of one kind does in each place it appears: one record of :data:`KINDS`.

    ``check(name, value, spec, optional)`` raises :class:`~edgewise.errors.InputError` naming the
    rule and the value; ``schema(spec)`` is the JSON Schema of a value that is not null;
    ``parse(name, text)`` reads a value from text (eval conditions); ``flag(spec)`` gives the
    argparse keywords of its command-line flag beyond ``dest`` and ``help``; ``help_tail`` ends its
    ``--help`` text (before the default); ``lists_names`` appends the names of the option's registry
    to that text; ``from_file`` values may be given as ``@FILE`` on the command line.
    """

    check: Callable[[str, Any, Spec, bool], None]
    schema: Callable[[Spec], dict[str, Any]]
    parse: Callable[[str, str], Any]
    flag: Callable[[Spec], dict[str, Any]] = lambda spec: {}
    help_tail: str = ""
    lists_names: bool = False
    from_file: bool = False


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{name} must be an integer, but got {text!r}") from None


def _parse_number(name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{name} must be a number, but got {text!r}") from None


def _parse_bool(name: str, text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise InputError(f"{name} must be true or false, but got {text!r}")
    return text.lower() == "true"


def _parse_text(name: str, text: str) -> str:
    return text


def _check_name(name: str, value: Any, spec: Spec, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, str):
        if not value:
            raise InputError(f"{name} must be a non-empty name, but got ''")
    elif not hasattr(value, "name"):  # a Tokenizer / Layout / Scorer object from Python
        raise InputError(f"{name} must be a name or an object with a .name, but got {type(value).__name__}")


def _float_flag(spec: Spec) -> dict[str, Any]:
    return {"type": float}


#: every kind of option, by the name a :class:`Spec` gives: adding a kind is adding one entry
KINDS: dict[str, Kind] = {
    # an integer, at least ``spec.minimum`` when it is set
    "int": Kind(check=lambda n, v, s, opt: check_int(n, v, minimum=s.minimum, optional=opt),
                schema=lambda s: {"type": "integer"} if s.minimum is None else {"type": "integer", "minimum": s.minimum},
                parse=_parse_int, flag=lambda s: {"type": int}),
    "number": Kind(check=lambda n, v, s, opt: check_number(n, v, optional=opt),
                   schema=lambda s: {"type": "number"}, parse=_parse_number, flag=_float_flag),
    # a number > 0
    "positive": Kind(check=lambda n, v, s, opt: check_number(n, v, above=0, optional=opt, what="a number > 0"),
                     schema=lambda s: {"type": "number", "exclusiveMinimum": 0}, parse=_parse_number, flag=_float_flag),
    # a threshold in [0, 1]
    "unit": Kind(check=lambda n, v, s, opt: check_number(n, v, low=0, high=1, optional=opt, what="a threshold in [0, 1]"),
                 schema=lambda s: {"type": "number", "minimum": 0, "maximum": 1}, parse=_parse_number, flag=_float_flag),
    # a switch: a flag without a value
    "bool": Kind(check=lambda n, v, s, opt: check_bool(n, v), schema=lambda s: {"type": "boolean"},
                 parse=_parse_bool, flag=lambda s: {"action": "store_true"}),
    # a payload (an instruction, a profile): @FILE on the command line
    "text": Kind(check=lambda n, v, s, opt: check_str(n, v, optional=opt), schema=lambda s: {"type": "string"},
                 parse=_parse_text, flag=lambda s: {"metavar": "TEXT|@FILE"}, help_tail=" (or @FILE)", from_file=True),
    # an identifier
    "str": Kind(check=lambda n, v, s, opt: check_str(n, v, optional=opt), schema=lambda s: {"type": "string"},
                parse=_parse_text),
    # one of ``spec.choices``
    "choice": Kind(check=lambda n, v, s, opt: check_str(n, v, choices=s.choices),
                   schema=lambda s: {"type": "string", "enum": list(s.choices)}, parse=_parse_text,
                   flag=lambda s: {"choices": s.choices}),
    # a name of ``spec.registry`` (when set), or an object with a ``.name`` from Python
    "name": Kind(check=_check_name, schema=lambda s: {"type": "string", "minLength": 1}, parse=_parse_text,
                 lists_names=True),
}


def _opt(default: Any, kind: str, help: str, **spec: Any) -> Any:
    if kind not in KINDS:
        raise ValueError(f"option kind must be one of: {', '.join(KINDS)}, but got {kind!r}")
    return field(default=default, metadata={"spec": Spec(kind, help, **spec)})


@dataclass(frozen=True)
class PackOptions:
    """How to pack: the budget, the tokenizer, the placement, the layout, scoring and pruning.

    Frozen and validated on construction; :meth:`replace` returns a new validated copy. ``model``
    names a model of :mod:`edgewise.catalog` (or is a ``ModelSpec``): the prompt is counted with its
    tokenizer, and without a ``budget`` the budget is its whole context window (give a budget to
    leave room for the answer). A ``tokenizer`` given with it must be the model's. Names are
    resolved when packing (:class:`~edgewise.packing.packer.Packer`), like the tokenizer's and layout's.
    ``prune`` and its options are :mod:`edgewise.prune.steps`; ``summaries`` and the ``summary_*``
    options are :mod:`edgewise.prune.summaries` (which chunks get one, extractive and LLM summaries).
    """

    budget: int | None = _opt(None, "int", "tokens for the whole rendered prompt (default: no limit)", minimum=1, short="-b")
    tokenizer: Any = _opt(None, "name", "tokenizer that counts the budget", short="-t", registry="tokenizers",
                          shown_default=DEFAULT_TOKENIZER)  # None: the model's, else DEFAULT_TOKENIZER
    order: str = _opt("edges", "name", "placement strategy", short="-o", registry="orders")
    model: Any = _opt(None, "name", "the model the prompt is for (edgewise list shows them): its tokenizer counts "
                      "the prompt and, without a budget, its context window is the budget")
    layout: Any = _opt("sections", "name", "prompt layout", short="-l", registry="layouts")
    scorer: Any = _opt(None, "name", "score chunks that have no score (or all, with rescore)", registry="scorers")
    rescore: bool = _opt(False, "bool", "score every chunk with the scorer, ignoring given scores")
    top_k: int | None = _opt(None, "int", "keep at most K chunks", minimum=1)
    min_score: float | None = _opt(None, "number", "drop chunks scoring below this")
    word_count_threshold: float | None = _opt(None, "positive", "Haystack's LostInTheMiddleRanker word threshold")
    min_truncated_tokens: int = _opt(32, "int", "shortest useful truncated chunk", minimum=1)
    high_importance_k: int = _opt(8, "int", "key facts for Sections A and C (sections layout)", minimum=0)
    system: str | None = _opt(None, "text", "system instruction")
    profile: str | None = _opt(None, "text", "user profile / memory layer")
    instructions: str | None = _opt(None, "text", "task instructions")
    expected_output: str | None = _opt(None, "text", "expected output note")
    trim_profile: bool = _opt(False, "bool", "truncate the profile if the fixed layers exceed the budget")
    key_id: str | None = _opt(None, "str", "the key chunk, for order position:K")
    query_aware: bool = _opt(False, "bool", "paper layout: ask the question before the documents too")
    prune: float | None = _opt(None, "unit", "keep only sentences scoring at least this threshold, in [0, 1]")
    prune_relative: bool = _opt(False, "bool", "the prune threshold is relative to each chunk's best sentence")
    prune_scorer: str = _opt("auto", "choice", "sentence scorer for prune and summaries", choices=("auto", "dense", "dense2", "lexical"))
    # what the summary options do is edgewise.prune.summaries (summary_backend to summary_cache: its llm module)
    summaries: str = _opt("given", "choice", "summaries of the chunks past the key facts that have no meta.summary: "
                          "given: none written; auto: extractive; llm: written by summary_backend", choices=("given", "auto", "llm"))
    summary_tokens: int = _opt(60, "int", "cap of an automatic summary", minimum=1)
    summary_backend: Any = _opt("local", "name", "summaries=llm: local (a GGUF model in-process) or openai (an "
                                "OpenAI-compatible endpoint); from Python, also an object with complete() and describe()")
    summary_model: str | None = _opt(None, "str", "summaries=llm: the model; local: a GGUF file, openai: the endpoint's "
                                     "model name", shown_default="local: the bundled Gemma 3 270M, openai: default")
    summary_base_url: str | None = _opt(None, "str", "summaries=llm with summary_backend openai: the endpoint",
                                        shown_default="http://127.0.0.1:8080/v1")
    summary_api: str = _opt("completions", "choice", "summaries=llm: ask the summary model for a completion or a chat "
                            "reply (the bundled Gemma 3 270M is a base model: completions)", choices=("completions", "chat"))
    summary_cache: str | None = _opt(None, "str", "summaries=llm: directory of cached replies",
                                     shown_default="$EDGEWISE_SUMMARY_CACHE, else $XDG_CACHE_HOME/edgewise/summaries")

    def __post_init__(self) -> None:
        for name, spec in _SPECS.items():
            _check(name, getattr(self, name), spec)

    # -- conversions ---------------------------------------------------------------------------

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def spec(cls, name: str) -> Spec:
        return _SPECS[name]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> PackOptions:
        """Options from a mapping; an unknown key is an error listing the valid ones."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise InputError(f"options must be an object, but got {type(data).__name__}")
        unknown = sorted(set(data) - set(_SPECS))
        if unknown:
            raise ConfigError(f"unknown pack option {unknown[0]!r}; choose from: {', '.join(cls.names())}")
        return cls(**data)

    @classmethod
    def from_strings(cls, data: Mapping[str, str]) -> PackOptions:
        """Options from ``key=value`` text (eval conditions): each value parsed by its option's type."""
        return cls.from_dict({k: parse_value(k, v) for k, v in data.items()})

    def to_dict(self, *, changed_only: bool = False) -> dict[str, Any]:
        """JSON-ready: tokenizer/layout/scorer objects given from Python appear by name."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if changed_only and value == f.default:
                continue
            out[f.name] = value if value is None or isinstance(value, (str, int, float, bool)) else getattr(value, "name", repr(value))
        return out

    def replace(self, **changes: Any) -> PackOptions:
        """A validated copy with ``changes``; an unknown name is an error listing the valid ones.

        Only the changed fields are checked (the others were checked when ``self`` was made): this
        runs on every ``pack()`` call that passes keywords.
        """
        if not changes:
            return self
        unknown = sorted(set(changes) - set(_SPECS))
        if unknown:
            raise ConfigError(f"unknown pack option {unknown[0]!r}; choose from: {', '.join(self.names())}")
        for name, value in changes.items():
            _check(name, value, _SPECS[name])
        new = object.__new__(PackOptions)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """JSON Schema (draft 2020-12) of the options object."""
        props = {}
        for f in dataclasses.fields(cls):
            spec: Spec = f.metadata["spec"]
            props[f.name] = {**_schema(spec, f.default), "default": f.default, "description": spec.help}
        return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "PackOptions",
                "type": "object", "properties": props, "additionalProperties": False}


_SPECS: dict[str, Spec] = {f.name: f.metadata["spec"] for f in dataclasses.fields(PackOptions)}
_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(PackOptions)}


def _check(name: str, value: Any, spec: Spec) -> None:
    KINDS[spec.kind].check(name, value, spec, _DEFAULTS[name] is None)


def _schema(spec: Spec, default: Any) -> dict[str, Any]:
    base = KINDS[spec.kind].schema(spec)
    return {"anyOf": [base, {"type": "null"}]} if default is None else base


def parse_value(name: str, text: str) -> Any:
    """One option's value from text, by the option's type (``none`` for an optional one)."""
    spec = _SPECS.get(name)
    if spec is None:
        raise ConfigError(f"unknown pack option {name!r}; choose from: {', '.join(PackOptions.names())}")
    text = text.strip()
    if text.lower() in ("none", "null") and _DEFAULTS[name] is None:
        return None
    return KINDS[spec.kind].parse(name, text)


# -- the command line ----------------------------------------------------------------------------

class ListedHelp(str):
    """A ``--help`` text that lists a registry's names, looked up only when the help is shown.

    Listing names loads the registry's plugins (:mod:`edgewise.registry`), which a command that is
    run, not asked for help, should not pay for. The string itself is the text with ``...`` in place
    of the names: it is what argparse stores, and checks on Python 3.14+, when the parser is built.
    :class:`HelpFormatter` shows :meth:`shown` instead. Both are argparse help strings (``%``
    escaped); ``template`` is plain text with one ``{names}``.

    >>> h = ListedHelp("placement; one of: {names} (default edges)", "orders")
    >>> str(h)
    'placement; one of: ... (default edges)'
    >>> h.shown()[:45]
    'placement; one of: edges, auto, edges-mirror,'
    """

    registry: str
    exclude: tuple[str, ...]
    _parts: tuple[str, str]

    def __new__(cls, template: str, registry: str, *, exclude: tuple[str, ...] = ()) -> ListedHelp:
        before, slot, after = template.partition("{names}")
        if not slot:
            raise ValueError(f"a listed help text needs a {{names}} slot, but got {template!r}")
        parts = (before.replace("%", "%%"), after.replace("%", "%%"))
        self = super().__new__(cls, "...".join(parts))
        self.registry, self.exclude, self._parts = registry, exclude, parts
        return self

    def shown(self) -> str:
        """The text with the names, plugins' included (this loads the registry's plugins)."""
        from .registry import describe

        names = ", ".join(name for name, _ in describe((self.registry,))[self.registry] if name not in self.exclude)
        return names.replace("%", "%%").join(self._parts)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help formatter, showing the names of :class:`ListedHelp` texts (the CLI's formatter)."""

    _showing = False

    def format_help(self) -> str:
        # only here: Python 3.14's add_argument also expands each help text (a check), with a fresh
        # formatter that never formats; building a parser must not list names (and load plugins)
        self._showing = True
        return super().format_help()

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        return text.shown() if self._showing and isinstance(text, ListedHelp) else text


def _argument_kwargs(name: str, spec: Spec, default: Any) -> dict[str, Any]:
    kind = KINDS[spec.kind]
    help_text = spec.help
    default = spec.shown_default if default is None else default
    registry = spec.registry if kind.lists_names else None
    if registry:
        help_text += "; one of: {names}"
    help_text += kind.help_tail
    if default not in (None, False):
        help_text += f" (default {default})"
    shown = ListedHelp(help_text, registry) if registry else help_text.replace("%", "%%")
    return {"dest": name, "help": shown, **kind.flag(spec)}


def add_arguments(parser: argparse.ArgumentParser, *, exclude: tuple[str, ...] = (), defaults: Mapping[str, Any] | None = None) -> None:
    """Add one flag per option to ``parser``. Unset flags stay absent (defaults live in PackOptions).

    ``defaults`` overrides a default for this command (e.g. ``variants`` uses ``layout="layered"``).
    """
    defaults = dict(defaults or {})
    group = parser.add_argument_group("pack options")
    for name, spec in _SPECS.items():
        if name in exclude:
            continue
        flags = ["--" + name.replace("_", "-")] + ([spec.short] if spec.short else [])
        group.add_argument(*flags, default=argparse.SUPPRESS, **_argument_kwargs(name, spec, defaults.get(name, _DEFAULTS[name])))
    parser.set_defaults(_pack_defaults=defaults)


def option_argument(parser: argparse.ArgumentParser, name: str, *flags: str, default: Any = None, help: str | None = None,
                    hide: tuple[str, ...] = ()) -> None:
    """One option as a flag of another command, under its own flag names (``edgewise prune --scorer``
    is the option ``prune_scorer``): type, choices and checks still come from the option.

    A ``help`` of a registry option may hold ``{names}``: the option's registry's names, but those in
    ``hide``, listed when the help is shown (:class:`ListedHelp`).
    """
    spec = _SPECS[name]
    value = _DEFAULTS[name] if default is None else default
    kw = _argument_kwargs(name, spec, value)
    if help is not None:
        text = help + (f" (default {value})" if value not in (None, False) else "")
        if spec.registry is not None and "{names}" in text:
            kw["help"] = ListedHelp(text, spec.registry, exclude=hide)
        else:
            kw["help"] = text.replace("%", "%%")
    parser.add_argument(*flags, default=value, **kw)


def from_args(args: argparse.Namespace, read_text: Any = None) -> PackOptions:
    """The options given on the command line (``@FILE`` text values read with ``read_text``)."""
    values = dict(getattr(args, "_pack_defaults", {}) or {})
    for name, spec in _SPECS.items():
        if hasattr(args, name):
            value = getattr(args, name)
            if KINDS[spec.kind].from_file and read_text is not None:
                value = read_text(value, name.replace("_", " "))
            values[name] = value
    return PackOptions.from_dict(values)
