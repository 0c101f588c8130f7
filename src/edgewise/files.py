"""Files edgewise keeps beside the user's: files that configure packing (profiles, templates), read and
parsed once per version, and lock files that name their holder (:class:`HolderLock`).

:func:`load_cached` keys what it parsed by the file's absolute path, modification time and size:
calls that find the same version reuse the parsed value, and a file that was edited (a new
``mtime_ns`` or size) is read again. It is safe to call from many threads; a file is read and
parsed once even when many threads ask for it at the same time.

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

from .errors import ConfigError

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


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the new one, never a part:
    a temporary file in the same directory, renamed over the target (processes that race are safe)."""
    import contextlib
    import tempfile
    from pathlib import Path

    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise



class HolderLock:
    """An exclusive ``flock`` on ``path`` whose holder writes its pid, host, start time and command into
    the file, so that whoever finds it taken can say who holds it. The operating system releases it
    when the holder ends, even by ``kill -9``: a lock file left by a dead process is simply taken.
    A context manager; :meth:`acquire` is the subclass's policy (fail at once, or wait), built on
    :meth:`open` and :meth:`try_take`.

    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.lock")
    >>> with HolderLock(path) as lock:
    ...     other = HolderLock(path)
    ...     fd = other.open()
    ...     other.try_take(fd), sorted(lock.holder())
    (False, ['command', 'host', 'pid', 'started'])
    >>> os.close(fd)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from pathlib import Path

        self.path = Path(path)
        self._fd: int | None = None

    def holder(self) -> dict[str, Any]:
        """What the current holder wrote into the lock file (empty when unreadable or empty)."""
        import json

        try:
            info = json.loads(self.path.read_bytes().decode("utf-8"))
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    @staticmethod
    def describe(holder: dict[str, Any]) -> str:
        if not holder:
            return "its holder is still writing its name"
        return (f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}: "
                f"{holder.get('command')}")

    def open(self) -> int:
        """The lock file's descriptor (the folder made if needed); :exc:`OSError` when it cannot be made."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)

    def try_take(self, fd: int) -> bool:
        """Take the lock on ``fd`` if it is free, without waiting."""
        try:
            import fcntl
        except ImportError:  # Windows
            import msvcrt

            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
                return True
            except OSError:
                return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def hold(self, fd: int) -> None:
        """Now held on ``fd``: write this process's name into the file."""
        import json
        import socket
        import sys
        import time

        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv),
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode("utf-8"), 0)
        self._fd = fd

    def acquire(self) -> HolderLock:
        fd = self.open()
        if not self.try_take(fd):
            os.close(fd)
            raise ConfigError(f"{self.path} is locked by {self.describe(self.holder())}")
        self.hold(fd)
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
            try:
                import fcntl
            except ImportError:  # Windows
                import msvcrt

                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
            else:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self):  # noqa: ANN204 - the subclass
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
