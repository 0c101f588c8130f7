"""Admission: the server's whole work policy, per process, in one place.

- **Cost, before the work.** Each request comes with its estimated model texts
  (:mod:`edgewise.serve.api.cost`). Over ``max_model_texts`` (``--max-model-texts``) it is refused at
  once with a 422 ``edgewise_too_costly`` that names the limit and the estimate; nothing is started.
- **Two lanes.** A request of at most :data:`CHEAP_MODEL_TEXTS` model texts (a pack, a count, a
  small rescore) runs in the *small* lane, any other in the *model* lane. Each lane is a fixed pool
  of ``threads`` worker threads with at most ``queue`` more requests waiting; a request past its
  lane's ``threads + queue`` is refused at once with a 503 and ``Retry-After``. Model work, however
  much of it, never holds a thread small requests wait for.
- **The deadline, after.** A request whose deadline passes while it waits is never started (its
  504 is sent when the deadline passes). One whose deadline passes while it runs gets its 504 at
  once, and its work runs under the deadline (:mod:`edgewise.score.deadline`): model inference
  checks it between batches and stops, which frees the thread within a batch. Work without a model
  cannot be interrupted: it finishes in the background, keeping its thread and its place in the
  count until then, so abandoned work never takes more than its lane's threads, and while it fills
  them that lane's new requests get a 503. The threads are never more than ``2 * threads``.

>>> import asyncio
>>> gate = Admission(threads=1, queue=0, max_model_texts=100)
>>> asyncio.run(gate.run(lambda: 6 * 7, timeout_s=5))
42
>>> asyncio.run(gate.run(lambda: 0, timeout_s=5, cost=Cost(101, ("101 to score the chunks with dense",))))
Traceback (most recent call last):
...
edgewise.serve.errors.ApiError: 422: this request would send about 101 texts through a model (101 to score the chunks with dense), but the server takes at most 100 a request (--max-model-texts)
>>> gate.close()
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ...score import deadline
from ..errors import ApiError
from .cost import FREE, Cost

T = TypeVar("T")
RETRY_AFTER_S = 1  # what a refused client is told to wait
CHEAP_MODEL_TEXTS = 64  # at most this many model texts (well under a second of MiniLM): the small lane


class _Expired(Exception):
    """The request's deadline passed before a thread took it: its work is not done."""


class Lane:
    """A bounded pool of threads with a bounded queue in front of it."""

    def __init__(self, threads: int, queue: int, name: str, what: str = "requests") -> None:
        self.threads, self.queue, self.name, self.what = threads, queue, name, what
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"edgewise-{name}")
        self._held = 0  # admitted and not finished: waiting, running, or abandoned and still running
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """Requests admitted and not finished."""
        return self._held

    def _admit(self) -> None:
        with self._lock:
            if self._held >= self.threads + self.queue:
                raise ApiError(503, "overloaded",
                               f"the server is busy: {self.threads} {self.what} are being worked on and {self.queue} "
                               f"more are waiting (--threads, --queue); retry in {RETRY_AFTER_S} s",
                               {"Retry-After": str(RETRY_AFTER_S)})
            self._held += 1

    def _release(self, _: Future[Any]) -> None:
        with self._lock:
            self._held -= 1

    async def run(self, fn: Callable[[], T], timeout_s: float) -> T:
        """``fn()`` in a pool thread within ``timeout_s`` (else :class:`TimeoutError`); a 503 when full."""
        self._admit()
        at = time.monotonic() + timeout_s

        def job() -> T:
            if time.monotonic() >= at:  # waited too long: its client has had its 504
                raise _Expired
            with deadline.until(at):  # model work checks it between batches and stops past it
                return fn()

        try:
            future = self._pool.submit(job)
        except BaseException:
            self._release(None)  # type: ignore[arg-type]
            raise
        future.add_done_callback(self._release)  # when it ends (or is cancelled unstarted), never before
        try:
            # on timeout, wait_for cancels the wrapper, which cancels the job if no thread has it yet;
            # deadline.Cancelled (the work stopped at its deadline) is a TimeoutError too
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
        except (_Expired, asyncio.TimeoutError):
            raise TimeoutError from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class Admission:
    """The small lane and the model lane, and the cost limit in front of them (see the module)."""

    def __init__(self, threads: int, queue: int, max_model_texts: int | None = None) -> None:
        self.threads, self.queue, self.max_model_texts = threads, queue, max_model_texts
        self.small = Lane(threads, queue, "work")
        self.model = Lane(threads, queue, "model", "requests with model work")

    @property
    def held(self) -> int:
        """Requests admitted and not finished, in both lanes (the metric of how busy the process is)."""
        return self.small.held + self.model.held

    def lane(self, cost: Cost) -> Lane:
        """Where a request of ``cost`` runs; a 422 when it is over the limit."""
        if self.max_model_texts is not None and cost.texts > self.max_model_texts:
            raise ApiError(422, "too_costly",
                           f"this request would send about {cost.texts} texts through a model ({cost.describe()}), "
                           f"but the server takes at most {self.max_model_texts} a request (--max-model-texts)")
        return self.small if cost.texts <= CHEAP_MODEL_TEXTS else self.model

    async def run(self, fn: Callable[[], T], timeout_s: float, cost: Cost = FREE) -> T:
        """``fn()`` in its lane within ``timeout_s`` (else :class:`TimeoutError`); a 422 over the cost
        limit, a 503 when the lane is full."""
        return await self.lane(cost).run(fn, timeout_s)

    def close(self) -> None:
        """Stop taking work; what waits is dropped, what runs finishes (or stops at its deadline)."""
        self.small.close()
        self.model.close()
