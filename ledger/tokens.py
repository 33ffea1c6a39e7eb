"""Holds: the money logic of the ledger.

A Hold reserves the most tokens a request can use, in one transaction
with row locks on every counter it touches (the User's month, the User's
Budget, the key's own Budget), always in that order, so concurrent
requests never hold more than there is and never deadlock. It is taken
whole from this month's allowance when it fits there, else from the
Budget; a key with its own Budget pays there too. Each Hold ends once:
settled to what the request used, or released.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.coltypes import utcnow
from ledger.models import (
    Budget, Counting, Hold, HoldState, MonthlyUsage, PaysFrom, UsageSource, UsageStatus, User,
)

DEFAULT_MONTHLY_ALLOWANCE = 5_000_000


def month_of(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m")


def next_month_start(moment: datetime) -> datetime:
    moment = moment.astimezone(timezone.utc)
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    return datetime(year, month, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class HoldAsk:
    """What a request needs: per prompt its tokens, and n × max(max_tokens, 1) each."""

    user_id: uuid.UUID
    key_id: uuid.UUID | None
    model: str
    prompt_tokens: int      # all prompts together
    choices: int            # prompts × n
    max_tokens: int
    may_lower: bool         # POST /v1/completions lowers max_tokens near the end
    source: UsageSource = UsageSource.api
    request_id: str = ""
    owner: str = ""
    lease_s: float = 60.0

    def tokens(self, max_tokens: int | None = None) -> int:
        m = self.max_tokens if max_tokens is None else max_tokens
        return self.prompt_tokens + self.choices * max(m, 1)


@dataclass(frozen=True)
class Balances:
    """What one request may still take, read under the locks."""

    allowance: int
    allowance_left: int
    budget_left: int
    key_left: int | None  # None: the key has no Budget of its own

    def fits(self, tokens: int) -> PaysFrom | None:
        if self.key_left is not None and tokens > self.key_left:
            return None
        if tokens <= self.allowance_left:
            return PaysFrom.allowance
        if tokens <= self.budget_left:
            return PaysFrom.budget
        return None


@dataclass(frozen=True)
class Shortfall:
    """Why not one token per choice fits: the message names it."""

    tokens: int
    key_budget: bool
    allowance: int
    refills_on: datetime


@dataclass(frozen=True)
class Held:
    hold_id: uuid.UUID
    tokens: int
    max_tokens: int
    pays_from: PaysFrom


def lowered_max_tokens(ask: HoldAsk, balances: Balances) -> int:
    """The largest max_tokens (>= 1) whose Hold fits somewhere, or 0."""
    best = 0
    for room in (balances.allowance_left, balances.budget_left):
        if balances.key_left is not None:
            room = min(room, balances.key_left)
        best = max(best, (room - ask.prompt_tokens) // ask.choices)
    return min(best, ask.max_tokens) if best >= 1 else 0


async def _month_row(session: AsyncSession, user_id: uuid.UUID, month: str) -> MonthlyUsage:
    query = select(MonthlyUsage).where(MonthlyUsage.user_id == user_id, MonthlyUsage.month == month)
    row = (await session.execute(query.with_for_update())).scalar_one_or_none()
    if row is None:
        # Two first requests of a month may race here: the loser reads the winner's row.
        try:
            async with session.begin_nested():
                session.add(MonthlyUsage(user_id=user_id, month=month, used=0))
        except IntegrityError:
            pass
        row = (await session.execute(query.with_for_update())).scalar_one()
    return row


async def _budget_row(session: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID | None) -> Budget | None:
    query = select(Budget).where(Budget.user_id == user_id)
    query = query.where(Budget.key_id == key_id) if key_id else query.where(Budget.key_id.is_(None))
    return (await session.execute(query.with_for_update())).scalar_one_or_none()


@dataclass
class LockedCounters:
    user: User
    month: MonthlyUsage
    budget: Budget | None
    key_budget: Budget | None

    def balances(self, default_allowance: int) -> Balances:
        allowance = self.user.monthly_allowance
        allowance = default_allowance if allowance is None else allowance
        return Balances(
            allowance=allowance,
            allowance_left=max(0, allowance - self.month.used),
            budget_left=self.budget.tokens if self.budget else 0,
            key_left=self.key_budget.tokens if self.key_budget else None,
        )


async def lock_counters(session: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID | None,
                        month: str) -> LockedCounters:
    """Lock, in one fixed order, every counter a Hold of this user and key touches."""
    user = (await session.execute(select(User).where(User.id == user_id).with_for_update())).scalar_one()
    month_row = await _month_row(session, user_id, month)
    budget = await _budget_row(session, user_id, None)
    key_budget = await _budget_row(session, user_id, key_id) if key_id else None
    return LockedCounters(user, month_row, budget, key_budget)


def _charge(counters: LockedCounters, pays_from: PaysFrom, tokens: int) -> None:
    """Take `tokens` (or give them back, when negative) from where the Hold pays."""
    if pays_from is PaysFrom.allowance:
        counters.month.used = max(0, counters.month.used + tokens)
    elif counters.budget is not None:
        counters.budget.tokens = max(0, counters.budget.tokens - tokens)
    if counters.key_budget is not None:
        counters.key_budget.tokens = max(0, counters.key_budget.tokens - tokens)


async def take_hold(session: AsyncSession, ask: HoldAsk, *, default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE,
                    now: datetime | None = None) -> Held | Shortfall:
    """Hold the request's tokens, lowering max_tokens when `ask.may_lower`; one transaction."""
    now = now or utcnow()
    month = month_of(now)
    counters = await lock_counters(session, ask.user_id, ask.key_id, month)
    balances = counters.balances(default_allowance)
    max_tokens = ask.max_tokens
    pays_from = balances.fits(ask.tokens())
    if pays_from is None and ask.may_lower:
        max_tokens = lowered_max_tokens(ask, balances)
        pays_from = balances.fits(ask.tokens(max_tokens)) if max_tokens else None
    if pays_from is None:
        await session.rollback()
        return _shortfall(ask, balances, now)
    tokens = ask.tokens(max_tokens)
    _charge(counters, pays_from, tokens)
    hold = Hold(user_id=ask.user_id, key_id=ask.key_id, source=ask.source, model=ask.model,
                request_id=ask.request_id, month=month, tokens=tokens, pays_from=pays_from,
                key_budget=counters.key_budget is not None, owner=ask.owner,
                lease_until=now + timedelta(seconds=ask.lease_s), created_at=now)
    session.add(hold)
    await session.commit()
    return Held(hold.id, tokens, max_tokens, pays_from)


def _shortfall(ask: HoldAsk, balances: Balances, now: datetime) -> Shortfall:
    key_short = balances.key_left is not None and ask.tokens(1) > balances.key_left
    return Shortfall(ask.tokens(), key_short, balances.allowance, next_month_start(now))


async def end_hold(session: AsyncSession, hold_id: uuid.UUID, *, used: int | None, counting: Counting | None,
                   status: UsageStatus, now: datetime | None = None) -> bool:
    """Settle the Hold to `used` tokens, or release it (used None). False if it had ended already."""
    now = now or utcnow()
    hold = (await session.execute(select(Hold).where(Hold.id == hold_id))).scalar_one()
    counters = await lock_counters(session, hold.user_id, hold.key_id if hold.key_budget else None, hold.month)
    hold = (await session.execute(select(Hold).where(Hold.id == hold_id).with_for_update())).scalar_one()
    if hold.state is not HoldState.held:
        await session.rollback()
        return False
    spent = 0 if used is None else used
    # Back what was not used; past the Hold, take the rest down to 0.
    _charge(counters, hold.pays_from, spent - hold.tokens)
    hold.state = HoldState.released if used is None else HoldState.settled
    hold.used, hold.counting, hold.status, hold.ended_at = spent, counting, status, now
    await session.commit()
    return True


async def renew_leases(session: AsyncSession, owner: str, until: datetime) -> None:
    await session.execute(
        update(Hold).where(Hold.owner == owner, Hold.state == HoldState.held).values(lease_until=until)
    )
    await session.commit()


async def expired_holds(session: AsyncSession, now: datetime) -> list[uuid.UUID]:
    query = select(Hold.id).where(Hold.state == HoldState.held, Hold.lease_until < now)
    ids = list((await session.execute(query)).scalars())
    await session.rollback()
    return ids
