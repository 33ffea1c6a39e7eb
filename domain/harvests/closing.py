"""The Runner's housekeeping ends the GPU runs of harvests whose work ended.

A run (harvest/run.py) keeps its final status after its end so that a Runner
that dies between reading it and writing the result follows the same run after
its restart (handler.py). Once the work row has ended, that result is committed
and nothing reads the run again: it would only hold a Python worker until its
own keep time (30 minutes) runs out, which stays as the backstop.
"""
from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from domain.harvests.handler import Runs, job_of
from ledger.work.tables import ENDED, Work

log = logging.getLogger("acs.harvests")


async def close_ended_runs(sessions: async_sessionmaker[AsyncSession], runs: Runs, now: datetime) -> int:
    """Close each live run whose work row ended (succeeded, failed, cancelled) or is gone; a run
    whose row is queued or running is left to its Runner. How many it closed. (`now`: a
    housekeeper's argument; a row's state is all this needs.)"""
    live = {job_id: name for name in await runs.live() if (job_id := job_of(name)) is not None}
    if not live:
        return 0
    async with sessions() as session:
        open_rows = set((await session.exec(select(Work.id).where(
            col(Work.id).in_(list(live)), col(Work.status).not_in(ENDED)))).all())
        await session.rollback()
    ended = [name for job_id, name in live.items() if job_id not in open_rows]
    for name in ended:
        try:
            await runs.close(name)
        except Exception:  # noqa: BLE001 - one run that will not go leaves the others be
            log.exception("could not close the harvest run %s; its keep time ends it", name)
    return len(ended)
