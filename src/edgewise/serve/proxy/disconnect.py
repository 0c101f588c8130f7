"""Waiting on an upstream call while watching for the client to leave (the proxy and the passthrough)."""

from __future__ import annotations

import logging
from typing import Any

import anyio
from fastapi import Request

log = logging.getLogger("edgewise.serve.proxy")


async def unless_gone(request: Request, call: Any, after: Any = None) -> Any:
    """Await ``call`` unless the client disconnects first (then cancel it: its upstream connection
    closes, and ``None`` is returned). The disconnect is watched for once the request body has been
    read (``after``: an event set when a body streamed through is done); exceptions of ``call``
    are raised as they are."""
    result: list[Any] = []
    error: list[BaseException] = []
    async with anyio.create_task_group() as group:
        async def run() -> None:
            try:
                result.append(await call)
            except Exception as e:  # noqa: BLE001 - raised below, outside the task group
                error.append(e)
            group.cancel_scope.cancel()

        async def watch() -> None:
            if after is not None:
                await after.wait()
            try:
                while (await request.receive())["type"] != "http.disconnect":
                    pass
            except Exception:  # noqa: BLE001 - the body's own error (e.g. past the limit) is call's to raise
                return
            log.info("client went away before the upstream answered: cancelling the upstream call")
            group.cancel_scope.cancel()

        group.start_soon(run)
        group.start_soon(watch)
    if error:
        raise error[0]
    return result[0] if result else None
