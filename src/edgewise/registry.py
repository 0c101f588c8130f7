"""Named, pluggable parts: one small registry class behind orders, layouts, scorers and the rest.

Built-in entries register themselves when their module is imported. Other packages add entries in
two ways: by calling a public decorator (:func:`edgewise.register_order` ...) or, with no import
needed, through an entry point in one of these groups (``pyproject.toml``)::

    [project.entry-points."edgewise.orders"]
    zigzag = "my_package.orders:zigzag"

Entry points are read once per registry, and only when needed: on the first lookup of a name that
is not registered yet (:meth:`Registry.get`, :meth:`~Registry.lookup`, ``in``), on the first
listing (:meth:`~Registry.names`, :meth:`~Registry.entries`, :meth:`~Registry.describe`, ``len``,
iteration, :func:`describe`, ``edgewise list``, ``--help``), or on :meth:`~Registry.source` or
:meth:`~Registry.unregister`. Never at ``import edgewise``, and never for a name already registered
(the built-ins): ``edgewise pack`` with built-in names does not import ``importlib.metadata``. Each
is registered under its entry-point name, with the distribution that ships it as its source. A
plugin that fails to load, or whose name is taken (a built-in, say), is skipped with a
:class:`PluginWarning` naming it, whenever the plugins load; the rest keep working. What each
group's object must be:

============================  ==========================================================================
``edgewise.orders``           a strategy ``fn(n: int, ctx: edgewise.order.PlaceContext) -> list[int]``:
                              ranks ``0..n-1`` (0 = best) in prompt order
``edgewise.layouts``          a factory ``fn(arg: str | None) -> edgewise.layout.Layout``
``edgewise.scorers``          a factory ``fn(arg: str | None) -> edgewise.score.Scorer``
``edgewise.tokenizers``       a factory ``fn(arg: str | None) -> edgewise.tokens.tokenizers.Tokenizer``
``edgewise.models``           an ``edgewise.catalog.ModelSpec``, or a mapping of ``tokenizer``,
                              ``context_window`` and optionally ``max_output_tokens``
``edgewise.backends``         a factory ``fn(**options) -> edgewise.eval.backends.Backend``
``edgewise.tasks``            a builder ``fn(**options) -> edgewise.eval.tasks.Task``
``edgewise.metrics``          a metric ``fn(prediction: str, golds: Sequence[str]) -> float``
============================  ==========================================================================

``arg`` is the text after ``name:`` in a spec such as ``template:FILE`` (None when there is none).
An object may declare the argument it takes for listings (and, for orders and tokenizers, require
it) with an ``edgewise_arg`` attribute, e.g. ``zigzag.edgewise_arg = "N"``.

>>> reg = Registry("widgets", entry_points=False)
>>> @reg.register("round")
... def make_round(arg):
...     return "a round widget"
>>> reg.get("round")(None), reg.names(), reg.source("round")
('a round widget', ['round'], 'edgewise')
>>> reg.register("round", len)
Traceback (most recent call last):
...
edgewise.errors.ConfigError: widget 'round' is already registered by edgewise (edgewise.registry.make_round); choose another name
"""

from __future__ import annotations

import importlib
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Generic, TypeVar

from .errors import ConfigError, unknown

T = TypeVar("T")

_KINDS = {  # every registry: the module that holds it (and registers the built-ins), its name there
    "orders": ("edgewise.order", "ORDERS"),
    "layouts": ("edgewise.layout", "LAYOUTS"),
    "scorers": ("edgewise.score", "SCORERS"),
    "tokenizers": ("edgewise.tokens.tokenizers", "TOKENIZERS"),
    "models": ("edgewise.catalog", "MODELS"),
    "backends": ("edgewise.eval.backends", "BACKENDS"),
    "tasks": ("edgewise.eval.tasks", "TASKS"),
    "metrics": ("edgewise.eval.metrics", "METRICS"),
}


class PluginWarning(UserWarning):
    """A plugin (an entry point) could not be loaded or registered; it was skipped."""


@dataclass(frozen=True)
class Entry:
    """One registered name. ``module``: set while the object is still to be imported from there."""

    name: str
    obj: Any
    source: str
    arg: str | None = None
    module: str | None = None

    @property
    def display(self) -> str:
        """The name as listed: ``template:FILE`` for one that takes an argument."""
        return f"{self.name}:{self.arg}" if self.arg else self.name


class Registry(Generic[T]):
    """Names to objects of one kind (``orders``, ``layouts`` ...); entry-point group ``edgewise.<kind>``."""

    def __init__(self, kind: str, *, entry_points: bool = True) -> None:
        self.kind = kind
        self.noun = kind[:-1] if kind.endswith("s") else kind
        self.group = f"edgewise.{kind}" if entry_points else None
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()  # guards _entries
        self._load_lock = threading.RLock()  # one plugin scan; re-entrant for plugins that look names up
        self._plugins_done = not entry_points
        self._plugins_loading = False

    # -- adding ----------------------------------------------------------------------------------

    def register(self, name: str, obj: Any = None, *, source: str | None = None, arg: str | None = None) -> Any:
        """Register ``obj`` under ``name``; without ``obj``, return a decorator that does.

        ``source`` says where it came from (default: ``edgewise`` for edgewise's own modules, else
        the top-level package of the object's module); ``arg`` names the argument it takes after
        ``name:`` (default: the object's ``edgewise_arg`` attribute). A name can be registered once.
        """
        if obj is None:
            return lambda fn: self.register(name, fn, source=source, arg=arg)
        if not isinstance(name, str) or not name or ":" in name or name != name.strip():
            raise ConfigError(f"a {self.noun} name must be a non-empty string without ':' or edge spaces, but got {name!r}")
        entry = Entry(name, obj, source or _source_of(obj), arg if arg is not None else getattr(obj, "edgewise_arg", None))
        with self._lock:
            old = self._entries.get(name)
            if old is not None and old.obj is not obj and not _fills(old, obj):
                raise ConfigError(
                    f"{self.noun} {name!r} is already registered by {old.source} ({_qualname(old)}); choose another name"
                )
            if old is not None and old.obj is obj and source is None:
                return obj  # the same object again (e.g. a plugin that also decorates): keep its source
            self._entries[name] = replace(entry, arg=entry.arg or (old.arg if old else None))
        return obj

    def reserve(self, name: str, module: str, *, arg: str | None = None) -> None:
        """Hold ``name`` for a built-in that ``module`` registers when imported (on first :meth:`get`).

        Keeps optional, heavier modules out of ``import edgewise`` while their names are listed.
        """
        with self._lock:
            if name in self._entries:
                raise ConfigError(f"{self.noun} {name!r} is already registered by {self._entries[name].source}")
            self._entries[name] = Entry(name, None, "edgewise", arg, module)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (for tests and interactive sessions); an unknown name raises ConfigError."""
        self._load_plugins()
        with self._lock:
            if name not in self._entries:
                raise unknown(self.noun, name, [e.display for e in self._entries.values()])
            del self._entries[name]

    # -- looking up ------------------------------------------------------------------------------

    def get(self, name: str) -> T:
        """The object registered as ``name``; an unknown name raises ConfigError listing the known ones."""
        return self._find(name, name)

    def lookup(self, spec: str, *, strict: bool = False) -> tuple[T, str | None]:
        """Split ``name[:arg]`` and find ``name``; the error for an unknown name quotes the whole spec.

        With ``strict``, an entry that declares an argument requires one and one that does not
        refuses one.
        """
        if not isinstance(spec, str):
            raise ConfigError(f"a {self.noun} must be given by name, but got {type(spec).__name__}")
        name, colon, arg = spec.partition(":")
        obj = self._find(name, spec)
        if strict:
            declared = self._entries[name].arg
            if declared and not arg:
                raise ConfigError(f"{self.noun} {name!r} needs an argument: {name}:{declared}")
            if not declared and colon:
                raise ConfigError(f"{self.noun} {name!r} takes no argument, but got {spec!r}")
        return obj, arg or None

    def _find(self, name: str, spec: str) -> T:
        entry = self._entry(name)
        if entry is None:
            raise unknown(self.noun, spec, self.display_names())
        if entry.module is not None:  # a reserved built-in: importing its module registers it
            importlib.import_module(entry.module)
            entry = self._entries[name]
            if entry.module is not None:
                raise ConfigError(f"{self.noun} {name!r}: module {entry.module} did not register it")
        return entry.obj

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def _entry(self, name: object) -> Entry | None:
        """The entry of ``name``: one already registered, else one a plugin adds (plugins load then)."""
        if not isinstance(name, str):
            return None
        entry = self._entries.get(name)
        if entry is None and not self._plugins_done:
            self._load_plugins()
            entry = self._entries.get(name)
        return entry

    def __contains__(self, name: object) -> bool:
        return self._entry(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def names(self) -> list[str]:
        """Registered names, in registration order (built-ins first, then plugins)."""
        self._load_plugins()
        with self._lock:
            return list(self._entries)

    def display_names(self) -> list[str]:
        """Names as listed, with the argument each takes: ``position:K|first|middle|last``."""
        return [e.display for e in self.entries()]

    def entries(self) -> list[Entry]:
        self._load_plugins()
        with self._lock:
            return list(self._entries.values())

    def source(self, name: str) -> str:
        """Where ``name`` came from: ``edgewise``, a plugin's distribution, or the registering package."""
        self._load_plugins()
        entry = self._entries.get(name)
        if entry is None:
            raise unknown(self.noun, name, self.display_names())
        return entry.source

    def describe(self) -> list[tuple[str, str]]:
        """``(listed name, source)`` for every entry."""
        return [(e.display, e.source) for e in self.entries()]

    # -- plugins ---------------------------------------------------------------------------------

    def _load_plugins(self) -> None:
        if self._plugins_done:
            return
        with self._load_lock:
            if self._plugins_done or self._plugins_loading:
                return  # done meanwhile, or this thread is inside a plugin that looks names up
            self._plugins_loading = True
            try:
                for ep in _entry_points(self.group or ""):
                    self._load_one(ep)
            finally:
                self._plugins_loading = False
                self._plugins_done = True

    def _load_one(self, ep: Any) -> None:
        dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value.partition(":")[0].split(".")[0]
        what = f"{self.noun} plugin {ep.name!r} from {dist} ({ep.value})"
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break edgewise
            warnings.warn(f"{what} was not loaded: {type(exc).__name__}: {exc}", PluginWarning, stacklevel=2)
            return
        with self._lock:
            old = self._entries.get(ep.name)
            if old is not None and old.obj is obj:  # the plugin module registered it itself
                self._entries[ep.name] = replace(old, source=dist)
                return
        try:
            self.register(ep.name, obj, source=dist)
        except ConfigError as exc:
            warnings.warn(f"{what} was not loaded: {exc}", PluginWarning, stacklevel=2)


def describe(kinds: tuple[str, ...] | None = None) -> dict[str, list[tuple[str, str]]]:
    """Every registry's ``(listed name, source)`` pairs, by kind; loads plugins.

    >>> describe(("orders",))["orders"][:2]
    [('edges', 'edgewise'), ('auto', 'edgewise')]
    """
    out = {}
    for kind in kinds or tuple(_KINDS):
        if kind not in _KINDS:
            raise unknown("registry", kind, list(_KINDS))
        module, attr = _KINDS[kind]
        out[kind] = getattr(importlib.import_module(module), attr).describe()
    return out


@lru_cache(maxsize=1)
def _all_entry_points() -> Any:
    from importlib.metadata import entry_points

    return entry_points()


def _entry_points(group: str) -> list[Any]:
    """The entry points of ``group`` in every installed distribution (scanned once per process)."""
    return list(_all_entry_points().select(group=group)) if group else []


def _fills(old: Entry, obj: Any) -> bool:
    """True when ``obj`` is the built-in that ``old`` reserved (it comes from the reserved module)."""
    return old.module is not None and getattr(obj, "__module__", None) == old.module


def _source_of(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or "?"
    top = module.split(".")[0]
    return "edgewise" if top == "edgewise" else top


def _qualname(entry: Entry) -> str:
    if entry.module is not None:
        return entry.module
    obj = entry.obj
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"
