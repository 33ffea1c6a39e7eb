"""What a kind of background work gives the Runner: a handler.

A kind (Jobs, Loom Nodes, harvests, Playground Runs) is a `WorkHandler`
registered by its own package; the composition root (`cluster/`) hands the
handlers to the Runner, which imports none of them. Capacity and order of a
kind are its queue row in the ledger (`work_queues`), not code.
"""
from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Awaitable, Callable, Protocol

from ledger.work import queue as queue
from ledger.tokens.tables import Counting, UsageStatus
from ledger.work.tables import Work, WorkKind


class WorkLost(Exception):
    """The row is no longer this Runner's to run (cancelled, or its lease lapsed)."""


class AttemptHold:
    """The Hold of one attempt, as the attempt's request sees it.

    The request calls `attach` once it holds tokens (the row records the
    Hold, or the attempt is lost) and `end` where a foreground request would
    end its Hold; the Runner writes that end with the result, in one
    transaction (`ledger.work.queue.finish`), so an attempt is charged once and
    keeps its answer. An attempt that never ends its Hold releases it.
    """

    def __init__(self, record: Callable[[uuid.UUID], Awaitable[bool]]) -> None:
        self._record = record
        self.ending: queue.HoldEnd = queue.RELEASE
        self._ended = False

    async def attach(self, hold_id: uuid.UUID) -> None:
        if not await self._record(hold_id):
            raise WorkLost(str(hold_id))

    async def end(self, _hold_id: uuid.UUID, used: int | None, counting: Counting | None,
                  status: UsageStatus) -> None:
        if not self._ended:
            self._ended = True
            self.ending = queue.HoldEnd(used, counting, status)


class WorkHandler(Protocol):
    kind: WorkKind
    kept_for: timedelta  # how long an ended row's result is kept

    async def run(self, work: Work, hold: AttemptHold) -> queue.Result:
        """Run one attempt to its result; a refusal or a failure of the work is a result too.

        Raise WorkLost when `hold.attach` does; any other exception is the
        platform's own failure, and the row ends with `failed(work)`.
        """
        ...

    def failed(self, work: Work) -> queue.Result:
        """The result of an attempt that the platform itself failed to run."""
        ...

    def refused(self, unusable: queue.Unusable) -> queue.Result:
        """The result of queued work whose key was revoked or whose User was suspended."""
        ...
