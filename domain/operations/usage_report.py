"""One User's usage (or one key's): settled tokens of each UTC day, and the Holds that still run."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime

from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens import usage
from ledger.accounts.tables import ApiKey, User
from domain.operations.api_keys import key_of
from domain.operations.users import find_user

DAY_COUNTS = ("completions", "tokens", "completed", "failed", "stopped")


@dataclass(frozen=True)
class UsageReport:
    user_id: uuid.UUID
    user_name: str
    key_id: uuid.UUID | None
    key_name: str | None
    first: date
    last: date
    days: list[usage.DayUsage]
    running: list[usage.RunningHold]

    def total(self) -> dict[str, int]:
        return {name: sum(getattr(day, name) for day in self.days) for name in DAY_COUNTS}


def days_or_this_month(now: datetime, first: date | None, last: date | None) -> tuple[date, date]:
    """The spec's default view: this UTC month up to today."""
    month_start, today = usage.this_month_so_far(now)
    return first or month_start, last or today


async def usage_report(session: AsyncSession, now: datetime, who: str | uuid.UUID, *, key_id: uuid.UUID | None = None,
                       first: date | None = None, last: date | None = None) -> UsageReport:
    first, last = days_or_this_month(now, first, last)
    user: User = await find_user(session, who)
    key: ApiKey | None = await key_of(session, user, key_id) if key_id else None
    user_id, user_name, key_name = user.id, user.name, key.name if key else None
    days = await usage.daily_usage(session, user_id, first, last, key_id)
    running = await usage.running_holds(session, user_id, key_id)
    return UsageReport(user_id, user_name, key_id, key_name, first, last, days, running)
