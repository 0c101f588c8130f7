"""Models by name: the tokenizer that counts a model's prompt and its context window.

``pack(query, chunks, model="gpt-4o")`` counts with the model's tokenizer (``o200k_base``) and,
without a ``budget``, packs up to its context window; the service's proxy sizes a conversation the
same way. The built-ins are OpenAI's chat models and the bundled Gemma 3 270M (``gemma-3-270m``). Add your own from a TOML or JSON file
(:func:`load_models`), with :func:`register_model`, or from a package through the entry-point
group ``edgewise.models`` (the object: a :class:`ModelSpec`, or a mapping of its fields).

A dated snapshot resolves to its family: a name that is not registered and ends in ``-YYYY-MM-DD``
or ``-MMDD`` (a real month and day) is looked up without that suffix (``gpt-4o-2024-08-06`` → ``gpt-4o``;
``gpt-4o-mini-2024-07-18`` → ``gpt-4o-mini``, never ``gpt-4o``). So does a GGUF file's name with its
quantisation (``gemma-3-270m-q4_k_m`` → ``gemma-3-270m``, the bundled model edgewise evaluates with). A fine-tuned model
``ft:BASE:org::id`` resolves as ``BASE``. Snapshots whose numbers differ from their family's are
registered under their own names (``gpt-4o-2024-05-13``, ``gpt-3.5-turbo-0613`` ...), so the rule
never reaches them. Nothing else is guessed: any other unknown name is an error.

>>> spec = get_model("gpt-4o-2024-08-06")
>>> spec.name, spec.tokenizer, spec.context_window, spec.max_output_tokens
('gpt-4o', 'o200k_base', 128000, 16384)
>>> get_model("gemma-3-270m-q4_k_m").name
'gemma-3-270m'
>>> get_model("gpt-4")
ModelSpec(name='gpt-4', tokenizer='cl100k_base', context_window=8192, max_output_tokens=8192)
>>> try:
...     get_model("gpt-4o-mni")
... except ConfigError as exc:
...     print(str(exc).partition(";")[0])
unknown model 'gpt-4o-mni' (did you mean 'gpt-4o-mini' or 'gpt-4.1-mini' or 'gpt-5-mini'?)
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from .errors import ConfigError
from .registry import Registry


def _problem(name: Any, tokenizer: Any, window: Any, out: Any) -> str | None:
    """What is wrong with a model's fields (rule and value), or None."""
    if not isinstance(name, str) or not name or ":" in name or name != name.strip():
        return f"name must be a non-empty string without ':' or edge spaces, but got {name!r}"
    if not isinstance(tokenizer, str) or not tokenizer:
        return f"tokenizer must be a tokenizer spec (a non-empty string), but got {tokenizer!r}"
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        return f"context_window must be an integer > 0, but got {window!r}"
    if out is not None:
        if isinstance(out, bool) or not isinstance(out, int) or out < 1:
            return f"max_output_tokens must be an integer > 0, but got {out!r}"
        if out > window:
            return f"max_output_tokens must be <= context_window ({window}), but got {out}"
    return None


@dataclass(frozen=True)
class ModelSpec:
    """A model: the tokenizer spec that counts its prompt (for :func:`edgewise.get_tokenizer`), its
    context window (prompt and output together, in tokens) and, where documented, its output cap."""

    name: str
    tokenizer: str
    context_window: int
    max_output_tokens: int | None = None

    def __post_init__(self) -> None:
        problem = _problem(self.name, self.tokenizer, self.context_window, self.max_output_tokens)
        if problem:
            raise ConfigError(f"model {self.name!r}: {problem}")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "tokenizer": self.tokenizer, "context_window": self.context_window,
                "max_output_tokens": self.max_output_tokens}


MODELS: Registry[ModelSpec] = Registry("models")  # plugins: entry-point group "edgewise.models"

# Tokenizers: tiktoken 0.14's model table (tiktoken/model.py, MODEL_TO_ENCODING and its prefixes).
# Context windows and output caps: each model's page in OpenAI's API docs,
# https://platform.openai.com/docs/models/<name> ("context window", "max output tokens").
_O200K, _CL100K = "o200k_base", "cl100k_base"
_BUILTIN: tuple[tuple[str, str, int, int | None], ...] = (
    ("gpt-5", _O200K, 400_000, 128_000),              # docs/models/gpt-5
    ("gpt-5-mini", _O200K, 400_000, 128_000),         # docs/models/gpt-5-mini
    ("gpt-5-nano", _O200K, 400_000, 128_000),         # docs/models/gpt-5-nano
    ("gpt-4.1", _O200K, 1_047_576, 32_768),           # docs/models/gpt-4.1
    ("gpt-4.1-mini", _O200K, 1_047_576, 32_768),      # docs/models/gpt-4.1-mini
    ("gpt-4.1-nano", _O200K, 1_047_576, 32_768),      # docs/models/gpt-4.1-nano
    ("gpt-4.5-preview", _O200K, 128_000, 16_384),     # docs/models/gpt-4.5-preview
    ("gpt-4o", _O200K, 128_000, 16_384),              # docs/models/gpt-4o
    ("gpt-4o-2024-05-13", _O200K, 128_000, 4_096),    # docs/models/gpt-4o: this snapshot's output cap is 4,096
    ("gpt-4o-mini", _O200K, 128_000, 16_384),         # docs/models/gpt-4o-mini
    ("chatgpt-4o-latest", _O200K, 128_000, 16_384),   # docs/models/chatgpt-4o-latest
    ("o1", _O200K, 200_000, 100_000),                 # docs/models/o1
    ("o1-pro", _O200K, 200_000, 100_000),             # docs/models/o1-pro
    ("o1-mini", _O200K, 128_000, 65_536),             # docs/models/o1-mini
    ("o1-preview", _O200K, 128_000, 32_768),          # docs/models/o1-preview
    ("o3", _O200K, 200_000, 100_000),                 # docs/models/o3
    ("o3-pro", _O200K, 200_000, 100_000),             # docs/models/o3-pro
    ("o3-mini", _O200K, 200_000, 100_000),            # docs/models/o3-mini
    ("o4-mini", _O200K, 200_000, 100_000),            # docs/models/o4-mini
    ("gpt-4-turbo", _CL100K, 128_000, 4_096),         # docs/models/gpt-4-turbo
    ("gpt-4-turbo-preview", _CL100K, 128_000, 4_096),  # docs/models/gpt-4-turbo-preview
    ("gpt-4-0125-preview", _CL100K, 128_000, 4_096),  # docs/models/gpt-4-turbo-preview (snapshots)
    ("gpt-4-1106-preview", _CL100K, 128_000, 4_096),  # docs/models/gpt-4-turbo-preview (snapshots)
    ("gpt-4", _CL100K, 8_192, 8_192),                 # docs/models/gpt-4 (gpt-4-0613, gpt-4-0314 by the rule)
    ("gpt-3.5-turbo", _CL100K, 16_385, 4_096),        # docs/models/gpt-3.5-turbo (-0125, -1106 by the rule)
    ("gpt-3.5-turbo-16k", _CL100K, 16_385, 4_096),    # docs/models/gpt-3.5-turbo (snapshots)
    ("gpt-3.5-turbo-0613", _CL100K, 4_096, 4_096),    # docs/deprecations: the 4K snapshot, retired 2024-09-13
    ("gpt-3.5-turbo-0301", _CL100K, 4_096, 4_096),    # docs/deprecations: the 4K snapshot, retired 2024-09-13
    ("gpt-3.5-turbo-instruct", _CL100K, 4_096, 4_096),  # docs/models/gpt-3.5-turbo-instruct
)

# Models edgewise runs itself (``edgewise eval --backend local``), so their profiles have a name to
# belong to. Gemma 3 270M: 32K context, 8,192 output tokens (Google's Gemma 3 model card); counted
# with its own vocabulary, read from the bundled GGUF (``gemma3``, needs the eval extra).
BUNDLED_GEMMA = "gemma-3-270m"
_LOCAL: tuple[tuple[str, str, int, int | None], ...] = (
    (BUNDLED_GEMMA, "gemma3", 32_768, 8_192),
    # Qwen2.5-Coder-1.5B-Instruct (the qwen extra, never a default): "Context Length: Full 32,768 tokens"
    # (the Qwen/Qwen2.5-Coder-1.5B-Instruct model card); 8,192 tokens out (Qwen2.5 "can generate up to 8K
    # tokens", the Qwen2.5-Coder cards' earlier wording); counted with its own vocabulary (``qwen2.5-coder``)
    ("qwen2.5-coder-1.5b-instruct", "qwen2.5-coder", 32_768, 8_192),
)

for _name, _tok, _window, _out in _BUILTIN + _LOCAL:
    MODELS.register(_name, ModelSpec(_name, _tok, _window, _out), source="edgewise")

_MONTH, _DAY = r"(?:0[1-9]|1[0-2])", r"(?:0[1-9]|[12]\d|3[01])"  # so -0613 is a snapshot and -2024 is not
_SNAPSHOT = re.compile(rf"-(?:20\d\d-{_MONTH}-{_DAY}|{_MONTH}{_DAY})$")
# a GGUF file's quantisation suffix (gemma-3-270m-q4_k_m, ...-Q8_0, ...-IQ3_XS, ...-f16): the same model
_QUANT = re.compile(r"[-.](?:i?q\d(?:_[a-z0-9]+)*|f16|f32|bf16)$", re.IGNORECASE)


def register_model(spec: ModelSpec, *, source: str | None = None) -> ModelSpec:
    """Add a model; a name already registered (a built-in, another file's) is refused.

    >>> register_model(ModelSpec("my-llama", "words", 8192)).context_window
    8192
    >>> MODELS.unregister("my-llama")
    """
    if not isinstance(spec, ModelSpec):
        raise ConfigError(f"register_model takes a ModelSpec, but got {type(spec).__name__}")
    MODELS.register(spec.name, spec, source=source or "python")
    return spec


def model_names() -> list[str]:
    """Every model :func:`get_model` knows by its own name: built-ins, plugins, loaded files."""
    names = MODELS.names()
    return names + [n for n in _overrides if n not in names]


def model_source(name: str) -> str:
    """Where the model ``name`` is defined: ``edgewise``, a plugin's distribution, ``python``, or a
    models file's path (the file whose ``override`` replaces it, if one does)."""
    held = _overrides.get(name)
    return held[0] if held is not None else MODELS.source(name)


def resolve_name(name: str) -> str | None:
    """The registered name ``name`` stands for (itself, its family, a fine-tune's base), or None."""
    if not isinstance(name, str) or not name:
        return None
    if name.startswith("ft:"):
        name = name[3:].partition(":")[0]
    if ":" not in name and _known(name):
        return name
    family = _SNAPSHOT.sub("", _QUANT.sub("", name))
    return family if family != name and ":" not in family and _known(family) else None


def _known(name: str) -> bool:
    return name in _overrides or name in MODELS


def get_model(name: str | ModelSpec) -> ModelSpec:
    """The model registered as ``name`` (or the family of a dated snapshot); a :class:`ModelSpec`
    passes through. An unknown name raises ConfigError with the closest names and the known ones."""
    if isinstance(name, ModelSpec):
        return name
    if not isinstance(name, str):
        raise ConfigError(f"a model must be given by name, but got {type(name).__name__}")
    found = resolve_name(name)
    if found is None:
        known = model_names()
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        raise ConfigError(f"unknown model {name!r}{hint}; choose one of: {', '.join(known)}")
    held = _overrides.get(found)
    return held[1] if held is not None else _as_spec(found, MODELS.get(found))


def _as_spec(name: str, obj: Any) -> ModelSpec:
    """A plugin's object as a ModelSpec (a mapping of the fields is accepted too)."""
    if isinstance(obj, ModelSpec):
        return obj if obj.name == name else replace(obj, name=name)  # listed under its entry-point name
    if isinstance(obj, Mapping):
        fields = {"tokenizer", "context_window", "max_output_tokens"}
        extra = sorted(set(obj) - fields)
        if extra:
            raise ConfigError(f"model {name!r} (from {MODELS.source(name)}): unknown field {extra[0]!r}; "
                              f"the fields are: {', '.join(sorted(fields))}")
        return ModelSpec(name, obj.get("tokenizer"), obj.get("context_window"), obj.get("max_output_tokens"))
    raise ConfigError(f"model {name!r} (from {MODELS.source(name)}) is a {type(obj).__name__}, "
                      "not a ModelSpec or a mapping of tokenizer, context_window, max_output_tokens")


# -- a user's models file -----------------------------------------------------------------------

_FIELDS = ("tokenizer", "context_window", "max_output_tokens", "override")
# name -> (the file, its spec): a file's override, seen before the registry's entry, which stays
_overrides: dict[str, tuple[str, ModelSpec]] = {}


def load_models(path: Any) -> list[ModelSpec]:
    """Add the models of a TOML (``.toml``) or JSON (``.json``) file: a table of name → fields.

    ``tokenizer`` (a tokenizer spec) and ``context_window`` are required, ``max_output_tokens``
    optional. A name that is already registered (a built-in, a plugin's, another file's) is refused
    unless its entry says ``override = true``; a name that is not registered may not say it (a
    typo would go unnoticed). Loading the same file again replaces its entries. The whole file is
    checked before any model is added; each error names the file, the model, the field, the rule and
    the value. Returns the models added.

    .. code-block:: toml

        ["llama-3.1-8b"]
        tokenizer = "gguf:/models/llama-3.1-8b-q4.gguf"
        context_window = 131072

        ["gpt-4o"]            # a gateway that caps gpt-4o lower than OpenAI does
        tokenizer = "o200k_base"
        context_window = 32000
        override = true
    """
    from pathlib import Path

    file = Path(path)
    data = _read(file)
    where = str(file)
    specs = []
    for name, entry in data.items():
        spec, override = _entry(where, name, entry)
        owner = _owner(name, where)
        if owner and not override:
            raise ConfigError(f"{where}: model {name!r} is already defined by {owner}; "
                              "add override = true to its entry to replace it")
        if override and not owner:
            raise ConfigError(f"{where}: model {name!r}: override must be set only to replace a known model, "
                              f"but {name!r} is not one")
        specs.append((spec, override))
    unload_models(where)
    for spec, override in specs:
        if override:
            _overrides[spec.name] = (where, spec)
        else:
            MODELS.register(spec.name, spec, source=where)
    return [spec for spec, _ in specs]


def _owner(name: str, where: str) -> str | None:
    """Who defines ``name``, this file (``where``) aside."""
    held = _overrides.get(name)
    if held is not None and held[0] != where:
        return held[0]
    source = MODELS.source(name) if name in MODELS else None
    return source if source != where else None


def unload_models(path: Any) -> list[str]:
    """Remove the models a file added, restoring any it overrode; returns their names."""
    where = str(path)
    gone = [e.name for e in MODELS.entries() if e.source == where]
    for name in gone:
        MODELS.unregister(name)
    for name, held in list(_overrides.items()):
        if held[0] == where:
            del _overrides[name]
            gone.append(name)
    return gone


def _read(file: Any) -> dict[str, Any]:
    suffix = file.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise ConfigError(f"a models file must end in .toml or .json, but got {str(file)!r}")
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"models file {str(file)!r} could not be read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: a models file must be UTF-8, but byte {exc.start} is not") from None
    if suffix == ".json":
        import json

        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{file}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    else:
        toml = _toml()
        try:
            data = toml.loads(text)
        except toml.TOMLDecodeError as exc:
            raise ConfigError(f"{file}: invalid TOML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: a models file must map model names to tables, but its top level is a "
                          f"{type(data).__name__}")
    if not data:
        raise ConfigError(f"{file}: a models file must define at least one model, but it is empty")
    return data


def _toml() -> Any:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise ImportError("a TOML models file needs Python 3.11+ or tomli: pip install tomli "
                              "(or write the file as JSON)") from None
    return tomllib


def _entry(where: str, name: str, entry: Any) -> tuple[ModelSpec, bool]:
    """One entry of a models file, checked: the spec and whether it says ``override``."""
    if not isinstance(name, str) or not name or ":" in name or name != name.strip():
        raise ConfigError(f"{where}: a model name must be a non-empty string without ':' or edge spaces, "
                          f"but got {name!r}")
    head = f"{where}: model {name!r}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{head} must be a table of {', '.join(_FIELDS)}, but got {entry!r}")
    extra = [k for k in entry if k not in _FIELDS]
    if extra:
        raise ConfigError(f"{head}: unknown field {extra[0]!r}; the fields are: {', '.join(_FIELDS)}")
    for required in ("tokenizer", "context_window"):
        if required not in entry:
            raise ConfigError(f"{head}: field {required!r} is required, but it is missing")
    override = entry.get("override", False)
    if not isinstance(override, bool):
        raise ConfigError(f"{head}: override must be true or false, but got {override!r}")
    problem = _problem(name, entry["tokenizer"], entry["context_window"], entry.get("max_output_tokens"))
    if problem:
        raise ConfigError(f"{head}: {problem}")
    _check_tokenizer(head, entry["tokenizer"])
    return ModelSpec(name, entry["tokenizer"], entry["context_window"], entry.get("max_output_tokens")), override


def _check_tokenizer(head: str, spec: str) -> None:
    """The tokenizer's name must be registered (its file, for ``hf:``/``gguf:``, is read when used)."""
    from .tokens.tokenizers import TOKENIZERS

    try:
        TOKENIZERS.lookup(spec, strict=True)
    except ConfigError as exc:
        raise ConfigError(f"{head}: tokenizer {spec!r} is not usable: {exc}") from None
