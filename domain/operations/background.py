"""Background work (Jobs, Loom Nodes, harvests) as the operator sees the Runner's queues."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.work import harvests
from ledger.work import queue as work
from ledger.errors import LedgerError, NotFound
from ledger.work.tables import Work, WorkKind, WorkStatus
from domain.operations.platform import Platform
from domain.operations.users import find_user


@dataclass(frozen=True)
class WorkLine:
    row: Work
    progress: tuple[int, int] | None  # a harvest's prompts read so far, of all


async def work_lines(session: AsyncSession, *, who: str | uuid.UUID | None = None, status: WorkStatus | None = None,
                     limit: int = 50) -> list[WorkLine]:
    user_id = (await find_user(session, who)).id if who else None
    rows = await work.listing(session, user_id=user_id, status=status, limit=limit)
    progress = await harvests.progress(session, [row.id for row in rows])
    return [WorkLine(row, progress.get(row.id)) for row in rows]


async def cancel(session: AsyncSession, platform: Platform, work_id: uuid.UUID) -> Work:
    """As the User's own cancel: a running request stops and pays its whole Hold; a harvest
    pays it only when its GPU run started."""
    row = await session.get(Work, work_id)
    if row is None:
        raise NotFound(f"No background work has the id {work_id}.")
    user_id, kind = row.user_id, row.kind
    await session.rollback()
    if kind == WorkKind.harvest:
        found = await harvests.cancel(session, work_id, user_id, platform.clock())
        ended = None if found is None else found[0]
    else:
        ended = await work.cancel(session, work_id, user_id, kind, platform.clock(), platform.job_result_kept)
    if ended is None:  # the row went between the two transactions (a deleted Loom's Node is erased)
        raise NotFound(f"No background work has the id {work_id}.")
    return ended


async def set_capacity(session: AsyncSession, kind: WorkKind, count: int) -> None:
    if count < 0:
        raise LedgerError("The number of rows that run at once is 0 or more.")
    await work.set_max_running(session, kind, count)
    await session.commit()
