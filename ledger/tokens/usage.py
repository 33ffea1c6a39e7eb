"""Read-only views of what users and keys spent: the admin's Usage page.

A Hold row is also its Completion's Usage row. Only settled Holds are
Completions that cost tokens; a released Hold costs nothing and, as the
spec's Usage page, we do not list it. Running Holds count as spent.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

from sqlalchemy import case, func
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens import grants
from ledger.accounts import keys
from ledger.store.coltypes import utcnow
from ledger.errors import LedgerError
from ledger.accounts.tables import ApiKey, Standing, User
from ledger.tokens.tables import Budget, Hold, HoldState, UsageSource, UsageStatus

MAX_DAYS = 366  # the spec's Usage page counts at most 366 UTC days at a time
# A settled Hold's status; `running` belongs to Holds still held.
_ENDED = (UsageStatus.completed, UsageStatus.failed, UsageStatus.stopped)


@dataclass(frozen=True)
class KeyLine:
    key: ApiKey
    tokens_this_month: int
    budget_left: int | None  # None: the key has no Budget of its own


@dataclass(frozen=True)
class Account:
    user_id: uuid.UUID
    name: str
    standing: Standing
    allowance: int
    allowance_is_default: bool
    allowance_used: int  # running Holds paid from the allowance included
    budget_left: int
    tokens_this_month: int  # every key, allowance and Budget alike
    running: int
    keys: list[KeyLine]

    @property
    def allowance_left(self) -> int:
        return max(0, self.allowance - self.allowance_used)


@dataclass(frozen=True)
class DayUsage:
    day: date
    completions: int
    tokens: int
    completed: int
    failed: int
    stopped: int


@dataclass(frozen=True)
class RunningHold:
    hold_id: uuid.UUID
    started: datetime
    key_name: str | None
    model: str
    source: UsageSource
    tokens: int


async def key_budgets(session: AsyncSession, user_id: uuid.UUID) -> dict[uuid.UUID, int]:
    """Tokens left in the own Budget of each of the user's keys that has one."""
    query = select(Budget.key_id, Budget.tokens).where(Budget.user_id == user_id, col(Budget.key_id).is_not(None))
    # The query leaves out the User's own Budget (key_id NULL); the check says so to the type checker.
    return {key_id: tokens for key_id, tokens in await session.exec(query) if key_id is not None}


async def key_lines(session: AsyncSession, user_id: uuid.UUID, *, include_revoked: bool = False,
                    now: datetime | None = None) -> list[KeyLine]:
    found = await keys.list_keys(session, user_id, include_revoked=include_revoked)
    spent = await keys.tokens_this_month(session, user_id, now)
    budgets = await key_budgets(session, user_id)
    return [KeyLine(key, spent.get(key.id, 0), budgets.get(key.id)) for key in found]


async def account(session: AsyncSession, user: User, now: datetime | None = None) -> Account:
    """A user's standing, allowance, Budget and keys, as the admin's User page shows them."""
    # grants.standing ends the transaction, which expires `user`: read it first.
    user_id, name, standing, override = user.id, user.name, user.standing, user.monthly_allowance
    balance = await grants.standing(session, user_id, now=now)
    lines = await key_lines(session, user_id, now=now)
    spent = await keys.tokens_this_month(session, user_id, now)
    running = await running_holds(session, user_id)
    return Account(
        user_id=user_id, name=name, standing=standing, allowance=balance.allowance,
        allowance_is_default=override is None, allowance_used=balance.allowance_used,
        budget_left=balance.budget, tokens_this_month=sum(spent.values()), running=len(running), keys=lines,
    )


def check_days(first: date, last: date) -> None:
    if first > last:
        raise LedgerError(f"The first day {first} comes after the last day {last}.")
    if (last - first).days + 1 > MAX_DAYS:
        raise LedgerError(f"Usage counts at most {MAX_DAYS} days at a time; {first} to {last} is more.")


async def daily_usage(session: AsyncSession, user_id: uuid.UUID, first: date, last: date,
                      key_id: uuid.UUID | None = None) -> list[DayUsage]:
    """Settled tokens and Completions of each UTC day from `first` to `last`, by the day they started."""
    check_days(first, last)
    day = utc_day(session, col(Hold.created_at)).label("day")
    query = (
        select(day, func.count(), func.sum(col(Hold.used)),
               *(_count_of(status) for status in _ENDED))
        .where(Hold.user_id == user_id, Hold.state == HoldState.settled,
               col(Hold.created_at) >= midnight(first),
               col(Hold.created_at) < midnight(last + timedelta(days=1)))
        .group_by(day)
        .order_by(day)
    )
    if key_id is not None:
        query = query.where(Hold.key_id == key_id)
    return [DayUsage(date.fromisoformat(str(d)[:10]), n, int(t or 0), int(c), int(f), int(s))
            for d, n, t, c, f, s in await session.exec(query)]


async def running_holds(session: AsyncSession, user_id: uuid.UUID,
                        key_id: uuid.UUID | None = None) -> list[RunningHold]:
    """The Holds of requests that still run, oldest first."""
    query = (
        select(Hold, ApiKey.name)
        .outerjoin(ApiKey, col(ApiKey.id) == col(Hold.key_id))
        .where(Hold.user_id == user_id, Hold.state == HoldState.held)
        .order_by(col(Hold.created_at))
    )
    if key_id is not None:
        query = query.where(Hold.key_id == key_id)
    return [RunningHold(hold.id, hold.created_at, key_name, hold.model, hold.source, hold.tokens)
            for hold, key_name in await session.exec(query)]


def _count_of(status: UsageStatus) -> Any:
    return func.sum(case((col(Hold.status) == status, 1), else_=0))


def utc_day(session: AsyncSession, column: Any) -> Any:
    # PostgreSQL's date() would use the session's time zone; SQLite stores UTC text.
    if session.get_bind().dialect.name == "postgresql":
        return func.to_char(func.timezone("UTC", column), "YYYY-MM-DD")
    return func.date(column)


def midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=timezone.utc)


def this_month_so_far(now: datetime | None = None) -> tuple[date, date]:
    """The spec's default view: this UTC month up to today."""
    today = (now or utcnow()).astimezone(timezone.utc).date()
    return today.replace(day=1), today
