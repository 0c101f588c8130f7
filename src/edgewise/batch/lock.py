"""One writer at a time per output folder: a batch job holds the folder's lock from start to end.

The lock is ``flock`` on ``_edgewise_batch.lock`` in the output folder (a name Parquet readers
skip, like the manifest's), through :class:`~edgewise.files.writing.HolderLock`, the lock of ``edgewise
index`` and ``eval run``: the holder writes its pid, host, start time and command into the file,
so a second writer can say who holds it, and the operating system releases it when the holder
ends, even by ``kill -9``: the file a dead job left is simply taken over.

A second writer on the folder (a new job, or ``--resume``) stops at once with :class:`OutputLocked`
naming the holder, as a second ``eval run`` on a run directory does (``edgewise index`` waits for
its store instead: an index update is short, a batch job is not, and once it ends a waiting run
would find the job finished or refused anyway).

The holder removes the file when it lets go, so a finished folder holds the result and its
manifest only. That is safe because every taker checks, once it holds the lock, that the file it
locked is still the one at the path (:meth:`OutputLock.acquire`); a ``kill -9`` leaves the file.

>>> import tempfile, os
>>> out = tempfile.mkdtemp()
>>> with OutputLock(out):
...     OutputLock(out).acquire()
Traceback (most recent call last):
...
edgewise.batch.lock.OutputLocked: output directory '...' is being written by another edgewise batch (pid ...
>>> os.listdir(out)
[]
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from pathlib import Path
from typing import Any

from ..errors import EdgewiseError, InputError
from ..files.writing import HolderLock

LOCK = "_edgewise_batch.lock"
NAME_WAIT = 1.0  # seconds a refused job gives the holder to write its name over a dead job's


class OutputLocked(EdgewiseError):
    """Another batch job holds the output folder."""


class OutputLock(HolderLock):
    """The exclusive lock of one batch output folder (see the module doc); a context manager."""

    def __init__(self, output: str | Path) -> None:
        super().__init__(Path(output) / LOCK)
        self.out = Path(output)

    def acquire(self) -> OutputLock:
        while True:
            try:
                fd = self.open()
            except OSError as exc:
                raise InputError(f"output directory {str(self.out)!r}: its lock file {str(self.path)!r} cannot be "
                                 f"made ({exc.strerror or exc}); give a directory you can write to") from None
            if not self.try_take(fd):
                os.close(fd)
                raise OutputLocked(f"output directory {str(self.out)!r} is being written by another edgewise batch "
                                   f"({self.describe(self._holder())}); let it finish (or stop it, then re-run with "
                                   "--resume), or give another directory")
            if self._still_there(fd):
                self.hold(fd)
                return self
            os.close(fd)  # its holder removed the file after this process opened it: take the new one

    def _holder(self) -> dict[str, Any]:
        """The holder's name; a job that has just taken the lock writes it over the last holder's (a dead
        job's, after ``kill -9``), so a name of a process gone from this machine is read again, briefly."""
        deadline = time.monotonic() + NAME_WAIT
        while True:
            holder = self.holder()
            if holder and not _gone(holder) or time.monotonic() >= deadline:
                return holder
            time.sleep(0.02)

    def _still_there(self, fd: int) -> bool:
        """Whether the file locked on ``fd`` is the one at the path (not one a holder removed since)."""
        try:
            at_path = os.stat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):  # removed while held: a taker that opened it sees it gone
                os.unlink(self.path)
        super().release()


def _gone(holder: dict[str, Any]) -> bool:
    """Whether the process ``holder`` names ran on this machine and has ended."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process: alive
        return False
    return False


__all__ = ["LOCK", "OutputLock", "OutputLocked"]
