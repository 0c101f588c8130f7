"""The evaluation grid over Ray tasks: ``edgewise eval run --ray-address ADDR``.

Each cell (example, condition, position) not yet in the store becomes one Ray task that builds its
prompt (the packing is the CPU work), asks the OpenAI-compatible endpoint and scores the answer.
At most ``backend.concurrency`` tasks are in flight (``--concurrency``: requests at once, whatever
the size of the cluster); as each one finishes (``ray.wait``) its record comes back to the driver,
which hands it to the run's one writer and submits the next cell. So the store has the same single
writer, lock and resume logic as a run without Ray: a run killed at any moment resumes with nothing
lost and nothing stored twice (a task Ray retries after a worker died still returns one record).

A task asks for ``task_cpus`` CPUs (default :data:`TASK_CPUS`): a request mostly waits for the
endpoint, so a 2-CPU node runs 8 at once. The nodes of a cluster need edgewise installed (the same
version as the driver), as Ray runs the tasks with their Python.

A cell that fails (a :class:`~edgewise.errors.BackendError` after the backend's retries) stops the
run like a run without Ray: no new cell is sent, the ones in flight are stored, the error is raised.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import BackendError, ConfigError, EdgewiseError
from ..raysupport import connect
from .backends import Backend
from .tasks import Example, Task

TASK_CPUS = 0.25
Job = tuple[str, Example, Any, Any]  # (key, example, position or None, Condition)


def fan_out(task: Task, jobs: Sequence[Job], backend: Backend, cell: Callable[[Task, Job, Backend], dict[str, Any]],
            write: Callable[[dict[str, Any]], None], *, address: str, in_flight: int | None = None,
            task_cpus: float | None = None) -> None:
    """Run ``cell(task, job, backend)`` for every job in Ray tasks on the cluster at ``address``, handing each
    record it returns to ``write`` in this process; at most ``in_flight`` (default ``backend.concurrency``) at once.

    ``cell`` must be a module-level function (Ray sends it by name); the task reaches it without its examples.
    """
    if not jobs:
        return
    cpus = TASK_CPUS if task_cpus is None else task_cpus
    if not isinstance(cpus, (int, float)) or isinstance(cpus, bool) or cpus <= 0:
        raise ConfigError(f"ray_task_cpus must be a number > 0, but got {cpus!r}")
    limit = max(1, int(in_flight or getattr(backend, "concurrency", 1)))
    started = connect(address)
    import ray

    try:
        light = ray.put(dataclasses.replace(task, examples=[]))  # each cell carries its own example
        try:
            shared = ray.put(backend)
        except TypeError as exc:
            raise ConfigError(f"backend {backend.name!r} cannot be sent to Ray tasks: {exc}") from None
        remote = ray.remote(cell).options(num_cpus=cpus, scheduling_strategy="SPREAD")
        _drain(iter(jobs), lambda job: remote.remote(light, job, shared), write, limit)
    finally:
        if started:
            ray.shutdown()


def _drain(jobs: Any, submit: Callable[[Job], Any], write: Callable[[dict[str, Any]], None], limit: int) -> None:
    """Keep ``limit`` tasks in flight until ``jobs`` runs out, writing each result as it comes back."""
    import ray
    from ray.exceptions import RayError, RayTaskError

    pending: dict[Any, str] = {}
    error: BaseException | None = None
    try:
        while True:
            while error is None and len(pending) < limit:
                job = next(jobs, None)
                if job is None:
                    break
                pending[submit(job)] = job[0]
            if not pending:
                break
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                key = pending.pop(ref)
                try:
                    record = ray.get(ref)
                except RayTaskError as exc:  # the cell's own error, raised in the task
                    cause = exc.cause if isinstance(exc.cause, BaseException) else exc
                    error = error or (cause if isinstance(cause, EdgewiseError) else exc)
                    continue
                except RayError as exc:  # the task could not run (its worker died past its retries ...)
                    error = error or BackendError(f"the Ray task of result {key} failed: {type(exc).__name__}: "
                                                  f"{' '.join(str(exc).split())[:300]}; run the same command to resume")
                    continue
                write(record)
    except KeyboardInterrupt:  # Ctrl-C: what came back is stored; the rest is cancelled
        for ref in pending:
            ray.cancel(ref)
        raise
    if error is not None:
        raise error
