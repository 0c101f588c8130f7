"""File-backed specs in a request are read only from the assets directory given at start.

``template:FILE``, ``calibrated:FILE``, ``hf:PATH``, ``cross:PATH``, ``dense:PATH``, ``gguf:PATH``
(and a plugin's spec whose declared argument is a file or a path) name files on the server. A
client names them relative to ``--assets DIR``; the server resolves the real path (symlinks
followed) and serves it only if it lies inside that directory. Absolute paths, ``..`` escapes
and symlinks out of the directory are refused with a 403; without ``--assets`` every file-backed
spec is refused. Replies show such paths relative to the directory again (:func:`relative`).

>>> import tempfile; root = Path(tempfile.mkdtemp()).resolve()
>>> resolve_spec("layouts", "template:t.j2", root) == f"template:{root}/t.j2"
True
>>> resolve_spec("layouts", "template:../../etc/passwd", root)
Traceback (most recent call last):
...
edgewise.serve.errors.ApiError: 403: layout 'template:../../etc/passwd' names a file outside the assets directory
>>> resolve_spec("scorers", "dense:int8", None), resolve_spec("orders", "position:2", None)
('dense:int8', 'position:2')
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from .errors import ApiError

# the built-ins whose argument is a file or a directory, by registry
FILE_BACKED = {"layouts": {"template"}, "orders": {"calibrated"}, "tokenizers": {"hf", "gguf"},
               "scorers": {"cross", "dense"}}
NOT_FILES = {("scorers", "dense"): {"int8", "fp32"}}  # dense:int8 is a precision, not a path
_REGISTRIES = {"orders": ("edgewise.order", "ORDERS"), "layouts": ("edgewise.layout", "LAYOUTS"),
               "scorers": ("edgewise.score", "SCORERS"), "tokenizers": ("edgewise.tokens", "TOKENIZERS")}
OPTION_KINDS = {"tokenizer": "tokenizers", "order": "orders", "layout": "layouts", "scorer": "scorers"}
DEBUG_NAMES = ("tokenizer", "strategy", "layout", "scorer")  # the DebugInfo fields that hold specs


def _declared_arg(kind: str, name: str) -> str | None:
    """The argument a registered entry declares (``FILE``, ``PATH``, ``K``...), plugins included."""
    module, attr = _REGISTRIES[kind]
    registry = getattr(importlib.import_module(module), attr)
    return next((e.arg for e in registry.entries() if e.name == name), None)


def is_file_backed(kind: str, name: str, arg: str) -> bool:
    if arg in NOT_FILES.get((kind, name), ()):
        return False
    if name in FILE_BACKED.get(kind, ()):
        return True
    declared = (_declared_arg(kind, name) or "").upper()
    return any(word in declared for word in ("FILE", "PATH", "DIR", ".JSON"))


def resolve_spec(kind: str, spec: Any, assets: Path | None) -> Any:
    """``spec`` with a file argument replaced by its real path inside ``assets`` (or a 403)."""
    if not isinstance(spec, str) or ":" not in spec or kind not in _REGISTRIES:
        return spec
    name, _, arg = spec.partition(":")
    if not arg or not is_file_backed(kind, name, arg):
        return spec
    noun = kind[:-1]
    if assets is None:
        raise ApiError(403, "forbidden_path", f"{noun} {spec!r} reads a file, and this server reads none: "
                                              "start it with --assets DIR to allow files from DIR")
    if "\x00" in arg:
        raise ApiError(403, "forbidden_path", f"{noun} {spec!r} names a path with a NUL character")
    if PurePosixPath(arg).is_absolute() or PureWindowsPath(arg).is_absolute() or arg.startswith("~"):
        raise ApiError(403, "forbidden_path", f"{noun} {spec!r} names an absolute path; "
                                              "name files relative to the assets directory")
    real = (assets / arg).resolve()
    if not real.is_relative_to(assets):
        raise ApiError(403, "forbidden_path", f"{noun} {spec!r} names a file outside the assets directory")
    return f"{name}:{real}"


def resolve_options(options: Mapping[str, Any], assets: Path | None) -> dict[str, Any]:
    """The pack options with every file-backed spec resolved inside ``assets``."""
    out = dict(options)
    for option, kind in OPTION_KINDS.items():
        if option in out:
            out[option] = resolve_spec(kind, out[option], assets)
    return out


def relative(debug_info: dict[str, Any], assets: Path | None) -> dict[str, Any]:
    """``debug_info`` (a dict, changed in place) naming asset files relative to ``assets`` again."""
    if assets is not None:
        prefix = f"{assets}/"
        for key in DEBUG_NAMES:
            value = debug_info.get(key)
            if isinstance(value, str) and prefix in value:
                debug_info[key] = value.replace(prefix, "")
    return debug_info
