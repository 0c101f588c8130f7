"""Writing files safely beside the user's: whole or not at all (:func:`write_atomic`), and one writer
at a time, named (:class:`HolderLock`).

>>> import tempfile
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / "counts.json"
>>> write_atomic(path, b"{}")
>>> path.read_bytes()
b'{}'
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError


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
