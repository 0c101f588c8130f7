"""Files that configure packing (profiles, templates), read and parsed once per version.

:func:`load_cached` keys what it parsed by the file's absolute path, modification time and size:
calls that find the same version reuse the parsed value, and a file that was edited (a new
``mtime_ns`` or size) is read again. It is safe to call from many threads; a file is read and
parsed once even when many threads ask for it at the same time. The file is read without blocking
(a FIFO is refused), in bounded pieces, as UTF-8.

>>> import json, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "profile.json")
>>> with open(path, "w") as f:
...     _ = f.write("[0.9, 0.5, 0.8]")
>>> load_cached(path, json.loads) is load_cached(path, json.loads)
True
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import ConfigError

T = TypeVar("T")
MAX_ENTRIES = 256  # distinct (file, parser) pairs kept; the least recently used go first

_Key = tuple[str, Callable[[str], Any]]
_entries: OrderedDict[_Key, tuple[tuple[int, int], Any]] = OrderedDict()
_key_locks: dict[_Key, threading.Lock] = {}
_lock = threading.Lock()


def load_cached(path: str, parse: Callable[[str], T], *, what: str = "file") -> T:
    """``parse(text of path)``, reused until the file changes.

    ``parse`` is part of the key, so pass a module-level function (not a new lambda per call).
    The text is decoded as UTF-8 (a leading byte-order mark is dropped). A file that cannot be read
    or is not UTF-8 raises :class:`ConfigError` naming ``what`` and the path; an error raised by
    ``parse`` propagates and nothing is cached.
    """
    key = (os.path.abspath(path), parse)
    stamp = _stamp(path, what)
    with _lock:
        found = _fresh(key, stamp)
        if found is not None:
            return found[0]
        key_lock = _key_locks.setdefault(key, threading.Lock())
    with key_lock:  # one reader per file: the others wait for its result
        stamp = _stamp(path, what)
        with _lock:
            found = _fresh(key, stamp)
        if found is not None:
            return found[0]
        value = parse(_read(path, what))
        with _lock:
            _entries[key] = (stamp, value)
            _entries.move_to_end(key)
            while len(_entries) > MAX_ENTRIES:
                old, _ = _entries.popitem(last=False)
                _key_locks.pop(old, None)
        return value


def clear() -> None:
    """Forget every parsed file (the next call reads it again)."""
    with _lock:
        _entries.clear()


def _fresh(key: _Key, stamp: tuple[int, int]) -> tuple[Any] | None:
    """The cached value (in a 1-tuple, as it may be falsy) when it was parsed from this version."""
    entry = _entries.get(key)
    if entry is None or entry[0] != stamp:
        return None
    _entries.move_to_end(key)
    return (entry[1],)


def _stamp(path: str, what: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"{what} {path!r} could not be read: {exc.strerror}") from None
    return st.st_mtime_ns, st.st_size


def _read(path: str, what: str) -> str:
    """The text of a regular file: opened without blocking (a FIFO would block forever), checked on
    the open descriptor, read in bounded pieces up to the size it had when opened."""
    import stat

    try:
        with open(path, "rb", opener=lambda p, flags: os.open(p, flags | getattr(os, "O_NONBLOCK", 0))) as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ConfigError(f"{what} {path!r} must be a regular file, but it is not (a FIFO, a device or a directory)")
            pieces, left = [], st.st_size
            while left > 0 and (piece := f.read(min(left, 1 << 20))):
                pieces.append(piece)
                left -= len(piece)
            data = b"".join(pieces)
    except OSError as exc:
        raise ConfigError(f"{what} {path!r} could not be read: {exc.strerror}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} {path!r} must be UTF-8 text, but byte 0x{data[exc.start]:02x} at offset {exc.start} is not"
        ) from None
