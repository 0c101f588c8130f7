"""One writer at a time per store: ``edgewise index`` holds the store's write lock for its whole run.

The lock is ``flock`` on a file, ``.edgewise-index.lock`` in the store's folder (for a store at a URL,
a file named after the URL in edgewise's cache folder: writers on one machine serialise, writers on
two machines are not seen by each other). The holder writes its pid, host, start time and command
into the file, so a second writer can say who holds it. The operating system releases the lock
when its holder ends, even by ``kill -9``: a lock file left by a dead process is simply taken over.

A second writer waits for the lock, up to ``timeout`` seconds, then stops with
:class:`StoreLocked` naming the holder; ``timeout=0`` stops at once.

>>> import tempfile
>>> store = tempfile.mkdtemp()
>>> with WriteLock(store, timeout=0):
...     WriteLock(store, timeout=0).acquire()
Traceback (most recent call last):
...
edgewise.index.lock.StoreLocked: store ... is being written by another edgewise index (pid ...
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import EdgewiseError, InputError
from ..files.writing import HolderLock

LOCK = ".edgewise-index.lock"
POLL = 0.2  # seconds between tries while waiting


class StoreLocked(EdgewiseError):
    """Another ``edgewise index`` holds the store's write lock (and kept it past the timeout)."""


def lock_path(location: str | Path) -> Path:
    """The lock file of the store at ``location``."""
    loc = str(location)
    if "://" in loc:
        from ..tokens.encodings import cache_dir

        return cache_dir() / "locks" / (hashlib.sha256(loc.encode("utf-8")).hexdigest()[:32] + ".lock")
    path = Path(loc)
    if path.exists() and not path.is_dir():
        raise InputError(f"store must be a folder or a URL, but {loc!r} is a file")
    return path / LOCK


def describe(holder: dict[str, Any]) -> str:
    return HolderLock.describe(holder)


class WriteLock(HolderLock):
    """The exclusive write lock of one store (see the module doc); a context manager."""

    def __init__(self, location: str | Path, *, timeout: float = 600.0,
                 on_wait: Callable[[dict[str, Any]], None] | None = None) -> None:
        if not timeout >= 0:
            raise InputError(f"lock_timeout must be >= 0 seconds, but got {timeout!r}")
        super().__init__(lock_path(location))
        self.location, self.timeout, self.on_wait = str(location), timeout, on_wait

    def acquire(self) -> WriteLock:
        try:
            fd = self.open()
        except OSError as exc:
            raise InputError(f"store {self.location}: its lock file {self.path} cannot be made "
                             f"({exc.strerror or exc}); index into a folder you can write to") from None
        deadline = time.monotonic() + self.timeout
        told = False
        while not self.try_take(fd):
            if time.monotonic() >= deadline:
                os.close(fd)
                raise StoreLocked(f"store {self.location} is being written by another edgewise index "
                                  f"({describe(self.holder())}); waited {self.timeout:g} s: let it finish or stop it, "
                                  "or wait longer with --lock-timeout SECONDS")
            if not told and self.on_wait is not None:
                self.on_wait(self.holder())
                told = True
            time.sleep(POLL)
        self.hold(fd)
        return self


__all__ = ["LOCK", "StoreLocked", "WriteLock", "lock_path"]
