"""Position profiles: how one model reads each place of a prompt, measured, named and found.

A profile is a JSON file that ``edgewise eval calibrate`` writes: the accuracy of a model with the
key document at each measured place (first ... last) of one task family's prompt, with each point's
count and 95% interval, the model's catalogue name, the task, the prompt layout, the document count,
the data rows it was measured on and, when measured, how much sentence pruning paid. ``order="auto"``
reads it: :func:`choose` picks the profile of the model being packed for, and places the chunks by
it (the ``calibrated`` order), or says why it did not and falls back to ``edges``.

Profiles are found, first match wins for a name, in:

1. the directories in ``$EDGEWISE_PROFILES`` (``os.pathsep``-separated);
2. the user's profile directory, ``$XDG_CONFIG_HOME/edgewise/profiles`` (default
   ``~/.config/edgewise/profiles``), where ``edgewise eval calibrate --install`` puts them;
3. the profiles shipped inside the package (``edgewise/data/profiles/``), measured on the bundled
   Gemma 3 270M on rows no evaluation reports.

A profile is used only when its own measurement says something: the 95% intervals of its best and
worst places must not overlap. Otherwise the differences are within its noise and ``edges`` places
(the pruning it measured to pay, a test of its own, still applies).

>>> p = Profile.from_dict({"model": "m", "task": "qa", "layout": "paper", "n_docs": 3,
...     "accuracy": [0.2, 0.1, 0.5], "measured": [
...         {"position": 0, "relative_position": 0.0, "n": 100, "accuracy": 0.2, "interval": [0.13, 0.29]},
...         {"position": 1, "relative_position": 0.5, "n": 100, "accuracy": 0.1, "interval": [0.06, 0.17]},
...         {"position": 2, "relative_position": 1.0, "n": 100, "accuracy": 0.5, "interval": [0.40, 0.60]}]})
>>> p.noise()  # None: the best place (last) is measurably better than the worst (middle)
>>> p.replace(measured=p.measured[:2]).noise()
'its best place (0, 20% [13-29%]) and worst (1, 10% [6-17%]) overlap: the difference is within its noise'
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files.cache import load_cached

FORMAT = "edgewise-profile/1"
ENV = "EDGEWISE_PROFILES"
SHIPPED = Path(__file__).parents[1] / "data" / "profiles"


@dataclass(frozen=True)
class Profile:
    """One measured position profile (see the module docstring); ``path`` is where it was read."""

    model: str
    task: str
    layout: str
    n_docs: int
    accuracy: tuple[float, ...]
    measured: tuple[dict[str, Any], ...] = ()
    rows: dict[str, Any] = field(default_factory=dict)
    prune: dict[str, Any] | None = None
    condition: str = "baseline"
    source: str | None = None
    path: str | None = None

    @property
    def name(self) -> str:
        """``MODEL/TASK-LAYOUT-N``: what ``edgewise list`` and the debug record call it."""
        return f"{self.model}/{self.task}-{self.layout}-{self.n_docs}"

    def replace(self, **changes: Any) -> Profile:
        return replace(self, **changes)

    def noise(self) -> str | None:
        """None when the best and worst measured places differ beyond their 95% intervals; else why
        the profile is not to be trusted."""
        points = [m for m in self.measured if m.get("n")]
        if len(points) < 2:
            return f"it has {len(points)} measured place(s); a profile needs at least 2"
        best = max(points, key=lambda m: (m["accuracy"], -m["relative_position"]))
        worst = min(points, key=lambda m: (m["accuracy"], m["relative_position"]))
        if best["interval"][0] > worst["interval"][1]:
            return None
        return (f"its best place ({_point(best)}) and worst ({_point(worst)}) overlap: "
                "the difference is within its noise")

    def prune_threshold(self) -> float | None:
        """The pruning threshold its measurement found to pay for this model, or None."""
        if not self.prune or not self.prune.get("pays"):
            return None
        return float(self.prune["threshold"])

    def to_dict(self) -> dict[str, Any]:
        out = {"format": FORMAT, **asdict(self)}
        out["accuracy"] = list(self.accuracy)
        out["measured"] = [dict(m) for m in self.measured]
        out.pop("path")
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str | None = None) -> Profile:
        """Check and read a profile's JSON object; errors name the field, the rule and the value."""
        where = f"profile {path!r}" if path else "profile"
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} must be a JSON object, but got {type(data).__name__}")
        fmt = data.get("format", FORMAT)
        if fmt != FORMAT:
            raise ConfigError(f"{where}: format must be {FORMAT!r}, but got {fmt!r}")
        for key in ("model", "task", "layout"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise ConfigError(f"{where}: {key} must be a non-empty string, but got {data.get(key)!r}")
        n_docs = data.get("n_docs")
        if isinstance(n_docs, bool) or not isinstance(n_docs, int) or n_docs < 1:
            raise ConfigError(f"{where}: n_docs must be an integer > 0, but got {n_docs!r}")
        acc = data.get("accuracy")
        if not isinstance(acc, list) or not acc or not all(_number(v) for v in acc):
            raise ConfigError(f"{where}: accuracy must be a non-empty list of numbers, but got {str(acc)[:80]}")
        measured = data.get("measured", [])
        if not isinstance(measured, list) or not all(_point_ok(m) for m in measured):
            raise ConfigError(f"{where}: measured must be a list of points with position, relative_position, "
                              f"n, accuracy and a two-number interval, but got {str(measured)[:120]}")
        prune = data.get("prune")
        if prune is not None and not (isinstance(prune, Mapping) and _number(prune.get("threshold"))
                                      and isinstance(prune.get("pays"), bool)):
            raise ConfigError(f"{where}: prune must be null or an object with a threshold and pays "
                              f"(true/false), but got {str(prune)[:80]}")
        rows = data.get("rows", {})
        if not isinstance(rows, Mapping):
            raise ConfigError(f"{where}: rows must be an object, but got {type(rows).__name__}")
        return cls(data["model"], data["task"], data["layout"], n_docs, tuple(float(v) for v in acc),
                   tuple(dict(m) for m in measured), dict(rows), dict(prune) if prune else None,
                   str(data.get("condition", "baseline")), data.get("source"), path)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _point_ok(m: Any) -> bool:
    return (isinstance(m, Mapping) and _number(m.get("relative_position")) and _number(m.get("accuracy"))
            and isinstance(m.get("n"), int) and isinstance(m.get("interval"), list) and len(m["interval"]) == 2
            and all(_number(v) for v in m["interval"]))


def _point(m: Mapping[str, Any]) -> str:
    lo, hi = m["interval"]
    return f"{m.get('position', m['relative_position'])}, {m['accuracy']:.0%} [{lo * 100:.0f}-{hi:.0%}]"


def _parse(text: str) -> Profile:
    try:
        return Profile.from_dict(json.loads(text))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ConfigError(f"is not valid JSON ({exc.__class__.__name__}: {exc})") from None


def load(path: str | Path) -> Profile:
    """Read one profile file (parsed once per file version); errors name the file."""
    where = str(path)
    try:
        return replace(load_cached(where, _parse, what="profile file"), path=where)
    except ConfigError as exc:
        msg = str(exc)
        raise ConfigError(msg if where in msg else f"profile file {where!r}: {msg.removeprefix('profile: ')}") from None


# -- where profiles live -----------------------------------------------------------------------


def user_dir() -> Path:
    """The user's profile directory: ``$XDG_CONFIG_HOME/edgewise/profiles`` (``~/.config/...``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "edgewise" / "profiles"


def directories() -> list[tuple[Path, str]]:
    """Where profiles are looked for, first wins, each with what it is."""
    dirs = [(Path(d), ENV) for d in os.environ.get(ENV, "").split(os.pathsep) if d.strip()]
    return dirs + [(user_dir(), "user"), (SHIPPED, "shipped")]


@dataclass(frozen=True)
class Found:
    """Every profile found, and the files that could not be read (path, error)."""

    profiles: tuple[Profile, ...]
    errors: tuple[tuple[str, str], ...] = ()
    origin: dict[str, str] = field(default_factory=dict)  # path -> EDGEWISE_PROFILES / user / shipped


def discover(dirs: Iterable[tuple[Path, str]] | None = None) -> Found:
    """Read every ``*.json`` profile in the profile directories. A profile whose name (model, task,
    layout, document count) an earlier directory already gave is shadowed; an unreadable file is
    listed in ``errors`` (and never used)."""
    seen: dict[str, Profile] = {}
    errors, origin = [], {}
    for directory, what in (directories() if dirs is None else dirs):
        if not directory.is_dir():
            continue
        for file in sorted(directory.glob("*.json")):
            try:
                prof = load(file)
            except ConfigError as exc:
                errors.append((str(file), str(exc)))
                continue
            if prof.name not in seen:
                seen[prof.name] = prof
                origin[str(file)] = what
    return Found(tuple(seen.values()), tuple(errors), origin)


def install(profile: Profile, directory: str | Path | None = None) -> Path:
    """Write ``profile`` into the user's profile directory (or ``directory``) as ``MODEL--TASK-LAYOUT-N.json``,
    atomically; returns the path."""
    from ..files.writing import write_atomic

    target = Path(directory) if directory is not None else user_dir()
    target.mkdir(parents=True, exist_ok=True)
    path = target / (profile.name.replace("/", "--") + ".json")
    write_atomic(path, (json.dumps(profile.to_dict(), indent=2) + "\n").encode("utf-8"))
    return path


# -- what order="auto" uses --------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    """What ``order="auto"`` decided: the order it placed by, the profile (or None) and why."""

    order: str
    profile: Profile | None
    reason: str
    prune: float | None = None

    def to_dict(self, applied_prune: float | None = None) -> dict[str, Any]:
        """The debug record's ``placement``; ``applied_prune``: the threshold the pack pruned at (the
        caller's own ``prune`` wins over the profile's)."""
        p = self.profile
        return {"requested": "auto", "order": self.order, "reason": self.reason, "prune": applied_prune,
                "profile_prune": self.prune,
                "profile": None if p is None else {"name": p.name, "path": p.path, "model": p.model, "task": p.task,
                                                   "layout": p.layout, "n_docs": p.n_docs}}


def choose(model: str | None, layout: str, n_chunks: int, *, found: Found | None = None) -> Choice:
    """The placement ``order="auto"`` uses for ``n_chunks`` chunks in ``layout`` for ``model``.

    Among the model's profiles: the layout's before others, then the task family ``qa`` before
    others, then the document count nearest ``n_chunks`` (the larger on a tie). A profile within
    its noise does not place (``edges`` does), but its pruning, tested on its own, still applies. A
    profile's pruning threshold applies only to its own layout: placement carries over to another
    layout, sentence pruning measured on one prompt format does not.

    >>> choose(None, "paper", 5).reason
    'no model given (model=...): auto places by edges'
    """
    if model is None:
        return Choice("edges", None, "no model given (model=...): auto places by edges")
    from ..catalog import resolve_name

    name = resolve_name(model) or model
    found = discover() if found is None else found
    mine = [p for p in found.profiles if (resolve_name(p.model) or p.model) == name]
    if not mine:
        where = ", ".join(str(d) for d, _ in directories())
        return Choice("edges", None, f"no profile for model {name!r} (looked in {where}): auto places by edges")
    best = min(mine, key=lambda p: (p.layout != layout, p.task != "qa", abs(p.n_docs - n_chunks), -p.n_docs, p.name))
    prune = best.prune_threshold()
    notes = []
    if best.layout != layout:
        notes.append(f"measured with layout {best.layout!r}; the model has none for {layout!r}")
        if prune is not None:
            notes.append(f"its pruning ({prune:g}) is for its own layout, not applied")
            prune = None
    if best.n_docs != n_chunks:
        notes.append(f"measured at {best.n_docs} documents, placed {n_chunks} chunks")
    tail = f" ({'; '.join(notes)})" if notes else ""
    noise = best.noise()
    if noise is not None:  # its places say nothing; its pruning test stands on its own
        return Choice("edges", best, f"profile {best.name}: placement not used, {noise}; auto places by edges{tail}",
                      prune)
    return Choice(f"calibrated:{best.path}", best, f"profile {best.name}{tail}", prune)


def table(found: Found | None = None) -> list[dict[str, Any]]:
    """One row per profile found: name, measured curve, whether ``auto`` uses it, and where it is."""
    found = discover() if found is None else found
    rows = []
    for p in found.profiles:
        noise = p.noise()
        rows.append({"name": p.name, "model": p.model, "task": p.task, "layout": p.layout, "n_docs": p.n_docs,
                     "measured": [round(m["accuracy"], 3) for m in p.measured], "prune": p.prune_threshold(),
                     "used": noise is None, "why_not": noise, "path": p.path,
                     "origin": found.origin.get(str(p.path), "")})
    return rows


__all__ = ["Profile", "Choice", "Found", "load", "discover", "install", "choose", "table", "directories", "user_dir",
           "SHIPPED", "ENV"]
