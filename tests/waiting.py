"""Waiting for what a background task does, bounded so that a broken one fails its test instead of hanging.

The bound is generous on purpose: CI's 2-core machine may run the whole suite at half
this machine's speed, and a wait that only polls costs nothing when the condition holds early.
"""
from __future__ import annotations

import asyncio
import inspect
from typing import Any, Awaitable, Callable


async def wait_until(check: Callable[[], bool | Awaitable[bool]], timeout_s: float = 5.0,
                     interval_s: float = 0.01) -> None:
    """Poll `check` (a plain or an async predicate) until it holds."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        held: Any = check()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        assert asyncio.get_running_loop().time() < deadline, "the condition never came true"
        await asyncio.sleep(interval_s)
