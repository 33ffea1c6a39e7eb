"""Cleanup that must run to its end even when its caller is cancelled.

A client that goes away cancels the task that serves it, sometimes again
and again (anyio re-delivers a cancellation at each await of a cancelled
scope). Freeing a line place, an in-flight slot or a Hold must still
happen: it runs in a task of its own, kept alive until it is done.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable

log = logging.getLogger("acs.cleanup")
_running: set[asyncio.Future[Any]] = set()


async def survive(cleanup: Awaitable[Any]) -> Any:
    task = asyncio.ensure_future(cleanup)
    _running.add(task)  # a strong reference until it is done
    task.add_done_callback(_running.discard)
    task.add_done_callback(_log_failure)
    return await asyncio.shield(task)


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("a cleanup failed", exc_info=task.exception())
