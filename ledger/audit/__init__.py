"""The ledger's invariants, checked on a quiet ledger (after issue 38's chaos soak and the leases' time).

    async def find_violations(session_factory, *, now: datetime | None = None,
                              default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE) -> list[Violation]
    def check_database(database_url: str, *, now: datetime | None = None,
                       default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE) -> list[Violation]

`session_factory` makes the ledger's AsyncSessions (ledger.store.db.session_factory); `now`
decides which leases lapsed; `default_allowance` is the platform's monthly allowance (Settings'
`monthly_allowance`) for Users without their own. A `Violation` is (invariant, subject, detail);
`Invariant.says` words each one. The command line: `python -m cluster.invariants`.
"""
from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from ledger.audit import tokens, work
from ledger.audit.violations import Invariant, Violation
from ledger.store.coltypes import utcnow
from ledger.store.db import make_engine, session_factory as make_sessions
from ledger.tokens.holds import DEFAULT_MONTHLY_ALLOWANCE

__all__ = ["Invariant", "Violation", "find_violations", "check_database"]


async def find_violations(session_factory: Any, *, now: datetime | None = None,
                          default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE) -> list[Violation]:
    """Every violation of every invariant, in the order of `Invariant`'s checks, read in one session.
    Its reads are not one snapshot: the ledger is meant to be quiet when this runs."""
    async with session_factory() as session:
        found = await tokens.holds(session)
        found += await tokens.budgets(session)
        found += await tokens.allowances(session, default_allowance)
        found += await work.work(session, now or utcnow())
        await session.rollback()
    return found


def check_database(database_url: str, *, now: datetime | None = None,
                   default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE) -> list[Violation]:
    """find_violations on the ledger at `database_url`, from code without an event loop."""
    async def check() -> list[Violation]:
        engine = make_engine(database_url)
        try:
            return await find_violations(make_sessions(engine), now=now, default_allowance=default_allowance)
        finally:
            await engine.dispose()

    return asyncio.run(check())
