"""Admission: at most ``--threads`` requests are worked on at once, at most ``--queue`` more wait.

Each process has one :class:`Admission`: a fixed pool of ``threads`` worker threads and a count
of the requests it holds (waiting or running). A request past ``threads + queue`` is refused at
once with a 503 and ``Retry-After``; nothing is started for it. A request whose deadline passes
while it waits is never started (its 504 is sent when the deadline passes). A request whose
deadline passes while it runs gets its 504 at once too, but a thread cannot be interrupted: the
work finishes in the background and keeps its thread and its place in the count until then, so
abandoned work can never take more than the pool's threads, and new requests are refused while
it fills them. The threads of the pool are never more than ``threads``.

>>> import asyncio
>>> gate = Admission(threads=1, queue=0)
>>> asyncio.run(gate.run(lambda: 6 * 7, timeout_s=5))
42
>>> gate.close()
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from .errors import ApiError

T = TypeVar("T")
RETRY_AFTER_S = 1  # what a refused client is told to wait


class _Expired(Exception):
    """The request's deadline passed before a thread took it: its work is not done."""


class Admission:
    """A bounded pool of threads with a bounded queue in front of it."""

    def __init__(self, threads: int, queue: int, name: str = "edgewise-work") -> None:
        self.threads, self.queue = threads, queue
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._held = 0  # admitted and not finished: waiting, running, or abandoned and still running
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """Requests admitted and not finished (the metric of how busy the pool is)."""
        return self._held

    def _admit(self) -> None:
        with self._lock:
            if self._held >= self.threads + self.queue:
                raise ApiError(503, "overloaded",
                               f"the server is busy: {self.threads} requests are being worked on and {self.queue} "
                               f"more are waiting (--threads, --queue); retry in {RETRY_AFTER_S} s",
                               {"Retry-After": str(RETRY_AFTER_S)})
            self._held += 1

    def _release(self, _: Future[Any]) -> None:
        with self._lock:
            self._held -= 1

    async def run(self, fn: Callable[[], T], timeout_s: float) -> T:
        """``fn()`` in a pool thread within ``timeout_s`` (else :class:`TimeoutError`); a 503 when full."""
        self._admit()
        deadline = time.monotonic() + timeout_s

        def job() -> T:
            if time.monotonic() >= deadline:  # waited too long: its client has had its 504
                raise _Expired
            return fn()

        try:
            future = self._pool.submit(job)
        except BaseException:
            self._release(None)  # type: ignore[arg-type]
            raise
        future.add_done_callback(self._release)  # when it ends (or is cancelled unstarted), never before
        try:
            # on timeout, wait_for cancels the wrapper, which cancels the job if no thread has it yet
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
        except (_Expired, asyncio.TimeoutError):
            raise TimeoutError from None

    def close(self) -> None:
        """Stop taking work; what waits is dropped, what runs finishes in its thread."""
        self._pool.shutdown(wait=False, cancel_futures=True)
