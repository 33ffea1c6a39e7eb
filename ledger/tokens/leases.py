"""The leases of Holds: a Hold lives while the process that took it renews it."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from datetime import timedelta
from typing import Any

from ledger.store.coltypes import utcnow
from ledger.tokens.tables import UsageStatus
from ledger.tokens.holds import end_hold, expired_holds, renew_leases

log = logging.getLogger("acs.ledger")


def new_owner() -> str:
    """Who holds a Hold: this process, so a restart can tell its dead Holds apart."""
    return f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class HoldLeases:
    """Renews this process's Holds, and releases the Holds of processes that died.

    A Hold lives while its owner renews it; after `lease_s` without renewal
    (a crash, kill -9, a lost node) any replica releases it, so the tokens
    come back and the request costs nothing.
    """

    def __init__(self, sessions: Any, owner: str, lease_s: float = 60.0, every_s: float = 15.0) -> None:
        self.sessions, self.owner, self.lease_s, self.every_s = sessions, owner, lease_s, every_s
        self._task: asyncio.Task | None = None

    async def reconcile(self) -> int:
        now = utcnow()
        async with self.sessions() as session:
            await renew_leases(session, self.owner, now + timedelta(seconds=self.lease_s))
        async with self.sessions() as session:
            dead = await expired_holds(session, now)
        for hold_id in dead:
            async with self.sessions() as session:
                await end_hold(session, hold_id, used=None, counting=None, status=UsageStatus.failed)
        if dead:
            log.warning("released %d Holds of requests that died with their process", len(dead))
        return len(dead)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                await self.reconcile()
            await asyncio.sleep(self.every_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
