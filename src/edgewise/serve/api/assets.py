"""File-backed specs in a request are read only from the assets directory given at start.

``template:FILE``, ``calibrated:FILE``, ``hf:PATH``, ``cross:PATH``, ``dense:PATH``, ``gguf:PATH``
(and a plugin's spec whose declared argument is a file or a path) name files on the server. A
client names them relative to ``--assets DIR``; the server resolves the real path (symlinks
followed) and serves it only if it lies inside that directory. Absolute paths, ``..`` escapes
and symlinks out of the directory are refused with a 403; without ``--assets`` every file-backed
spec is refused. Replies show such paths relative to the directory again (:func:`relative`).

A file that exists must be a regular file or a directory: a FIFO, a device or a socket is a 403
(a FIFO would block a worker thread forever, ``/dev/zero`` would never end). The text files the
server reads whole, templates (``template:FILE``) and profiles (``calibrated:FILE``), must be
regular files of at most ``--max-asset-bytes`` (default 1 MiB): a larger one is a 422 naming the
limit and the size. The check opens the file without blocking and looks at the open descriptor,
so what is checked is what is read (:mod:`edgewise.files` reads it again, in bounded pieces).
These checks run in the worker thread of the request, never on the event loop.

>>> import tempfile; root = Path(tempfile.mkdtemp()).resolve()
>>> resolve_spec("layouts", "template:t.j2", root) == f"template:{root}/t.j2"
True
>>> resolve_spec("layouts", "template:../../etc/passwd", root)
Traceback (most recent call last):
...
edgewise.serve.errors.ApiError: 403: layout 'template:../../etc/passwd' names a file outside the assets directory
>>> resolve_spec("scorers", "dense:int8", None), resolve_spec("orders", "position:2", None)
('dense:int8', 'position:2')
>>> _ = (root / "big.j2").write_text("x" * 2000)
>>> resolve_spec("layouts", "template:big.j2", Assets(root, max_bytes=1000))
Traceback (most recent call last):
...
edgewise.serve.errors.ApiError: 422: layout 'template:big.j2' names a file of 2000 bytes, but asset files may be at most 1000 bytes (--max-asset-bytes)
"""

from __future__ import annotations

import importlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from ...errors import InputError
from ..errors import ApiError

# the built-ins whose argument is a file or a directory, by registry
FILE_BACKED = {"layouts": {"template"}, "orders": {"calibrated"}, "tokenizers": {"hf", "gguf"},
               "scorers": {"cross", "dense"}}
NOT_FILES = {("scorers", "dense"): {"int8", "fp32"}}  # dense:int8 is a precision, not a path
_REGISTRIES = {"orders": ("edgewise.order", "ORDERS"), "layouts": ("edgewise.layout", "LAYOUTS"),
               "scorers": ("edgewise.score", "SCORERS"), "tokenizers": ("edgewise.tokens.tokenizers", "TOKENIZERS")}
OPTION_KINDS = {"tokenizer": "tokenizers", "order": "orders", "layout": "layouts", "scorer": "scorers"}
DEBUG_NAMES = ("tokenizer", "strategy", "layout", "scorer")  # the DebugInfo fields that hold specs
TEXT_FILES = {("layouts", "template"), ("orders", "calibrated")}  # read whole as text: size-limited
MAX_ASSET_BYTES = 1024 * 1024
_NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"))


@dataclass(frozen=True)
class Assets:
    """The assets directory (a resolved path) and the largest text file read from it."""

    root: Path
    max_bytes: int = MAX_ASSET_BYTES


def as_assets(value: Assets | Path | None) -> Assets | None:
    """``value`` as :class:`Assets` (a bare path gets the default size limit)."""
    return value if value is None or isinstance(value, Assets) else Assets(Path(value))


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


def resolve_spec(kind: str, spec: Any, assets: Assets | Path | None) -> Any:
    """``spec`` with a file argument replaced by its real path inside ``assets`` (or a 403)."""
    if not isinstance(spec, str) or ":" not in spec or kind not in _REGISTRIES:
        return spec
    name, _, arg = spec.partition(":")
    if not arg or not is_file_backed(kind, name, arg):
        return spec
    noun = kind[:-1]
    assets = as_assets(assets)
    if assets is None:
        raise ApiError(403, "forbidden_path", f"{noun} {spec!r} reads a file, and this server reads none: "
                                              "start it with --assets DIR to allow files from DIR")
    if "\x00" in arg:
        raise ApiError(403, "forbidden_path", f"{noun} {spec!r} names a path with a NUL character")
    if PurePosixPath(arg).is_absolute() or PureWindowsPath(arg).is_absolute() or arg.startswith("~"):
        raise ApiError(403, "forbidden_path", f"{noun} {spec!r} names an absolute path; "
                                              "name files relative to the assets directory")
    real = (assets.root / arg).resolve()
    if not real.is_relative_to(assets.root):
        raise ApiError(403, "forbidden_path", f"{noun} {spec!r} names a file outside the assets directory")
    check_file(real, f"{noun} {spec!r}", text=(kind, name) in TEXT_FILES, max_bytes=assets.max_bytes)
    return f"{name}:{real}"


def check_file(path: Path, what: str, *, text: bool, max_bytes: int) -> None:
    """Refuse what ``path`` names unless it is a regular file (at most ``max_bytes`` when ``text``)
    or, when not ``text``, a directory. A missing file is left to the reader (its own message)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)  # never blocks, even on a FIFO; a symlink swapped in meanwhile is refused
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ApiError(403, "forbidden_path", f"{what} names a file that cannot be opened: {exc.strerror}") from None
    try:
        st = os.fstat(fd)  # the file that was opened, not the name
    finally:
        os.close(fd)
    kind = next((noun for test, noun in _NOT_REGULAR if test(st.st_mode)), None)
    if stat.S_ISDIR(st.st_mode) and text:
        kind = "a directory"
    if kind is not None:
        raise ApiError(403, "forbidden_path", f"{what} names {kind}; asset files must be regular files")
    if text and st.st_size > max_bytes:
        raise ApiError(422, "asset_too_large", f"{what} names a file of {st.st_size} bytes, but asset files may be "
                                               f"at most {max_bytes} bytes (--max-asset-bytes)")


# options that name a model file, a directory to write or a URL to call: a request may not set them
LLM_SUMMARY_OPTIONS = ("summary_backend", "summary_model", "summary_base_url", "summary_api", "summary_cache")


def resolve_options(options: Mapping[str, Any], assets: Assets | Path | None) -> dict[str, Any]:
    """The pack options with every file-backed spec resolved inside ``assets``.

    LLM-written summaries are not served: they would let a request load any model file, write into
    any directory and call any URL, and run a model for every request.
    """
    named = [k for k in LLM_SUMMARY_OPTIONS if k in options]
    if named or options.get("summaries") == "llm":
        what = ", ".join(named) if named else "summaries='llm'"
        raise InputError(f"LLM-written summaries are not served over HTTP (they load a model file, write a cache "
                         f"directory and call an endpoint), but the request sets {what}; use summaries='auto' "
                         "(extractive) or pack with summaries='llm' in your own process")
    out = dict(options)
    for option, kind in OPTION_KINDS.items():
        if option in out:
            out[option] = resolve_spec(kind, out[option], assets)
    return out


def relative(debug_info: dict[str, Any], assets: Assets | Path | None) -> dict[str, Any]:
    """``debug_info`` (a dict, changed in place) naming asset files relative to ``assets`` again."""
    assets = as_assets(assets)
    if assets is not None:
        prefix = f"{assets.root}/"
        for key in DEBUG_NAMES:
            value = debug_info.get(key)
            if isinstance(value, str) and prefix in value:
                debug_info[key] = value.replace(prefix, "")
    return debug_info
