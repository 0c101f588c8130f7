"""Worker processes that end with the process that started them.

A pool worker runs :func:`die_with_parent` first: on Linux it asks the kernel to send it SIGKILL
when its parent dies (``prctl(PR_SET_PDEATHSIG)``, through ctypes), and everywhere a daemon
thread checks every :data:`POLL` seconds that the parent is still its parent and ends the worker
otherwise (the fallback where prctl is missing, and the cover for a parent that died before the
worker asked). Ctrl-C is left to the parent (the worker ignores SIGINT; the parent stops the
workers itself), so one Ctrl-C gives one message, not one traceback per worker.

Multiprocessing's resource tracker needs nothing more: it exits when the last process holding its
pipe (the parent and the workers) is gone.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
POLL = 0.5


def die_with_parent(parent: int) -> bool:
    """Make this process end when process ``parent`` (its parent) ends; returns whether prctl took.

    Call it in the child, first thing. If ``parent`` is already gone, the process exits now.
    """
    armed = _pdeathsig(signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl was in place
        os._exit(1)
    threading.Thread(target=_watch, args=(parent,), name="edgewise-lifeline", daemon=True).start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return armed


def _pdeathsig(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL)
    os._exit(1)
