"""Holds: the money logic of the ledger.

A Hold reserves the most tokens a request can use, in one transaction
with row locks on every counter it touches (the User's month, the User's
Budget, the key's own Budget), always in that order, so concurrent
requests never hold more than there is and never deadlock. The month's
row is locked by every Hold of the User, so it orders them all. It is taken
whole from this month's allowance when it fits there, else from the
Budget; a key with its own Budget pays there too. Each Hold ends once:
settled to what the request used, or released.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from datetime import datetime, timedelta, timezone

from sqlalchemy import case, insert, or_, select, update
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.coltypes import utcnow
from ledger.ids import uuid7
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


def _upsert(session: AsyncSession) -> Any:
    """The dialect's INSERT, which has ON CONFLICT on both PostgreSQL and SQLite."""
    from sqlalchemy.dialects import postgresql, sqlite

    # An AsyncConnection has the dialect; an AsyncSession reaches it through its bind.
    dialect = getattr(session, "dialect", None) or session.bind.dialect
    return (postgresql if dialect.name == "postgresql" else sqlite).insert


async def _lock_month(session: AsyncSession, user_id: uuid.UUID, month: str) -> int:
    """This month's allowance used, its row made if needed and locked, in one statement."""
    table = MonthlyUsage.__table__
    statement = _upsert(session)(table).values(user_id=user_id, month=month, used=0)
    statement = statement.on_conflict_do_update(
        index_elements=[table.c.user_id, table.c.month], set_={"used": table.c.used},
    ).returning(table.c.used)
    return int((await session.execute(statement)).scalar_one())


async def _lock_budgets(session: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID | None) -> dict:
    """Tokens left in the User's Budget (key None) and the key's own, locked in one fixed order."""
    table = Budget.__table__
    owners = table.c.key_id.is_(None) if key_id is None else or_(table.c.key_id.is_(None), table.c.key_id == key_id)
    query = (select(table.c.key_id, table.c.tokens).where(table.c.user_id == user_id, owners)
             .order_by(table.c.key_id.is_not(None)).with_for_update())
    return {row.key_id: int(row.tokens) for row in await session.execute(query)}


async def _allowance(session: AsyncSession, user_id: uuid.UUID, default_allowance: int) -> int:
    override = (await session.execute(select(User.monthly_allowance).where(User.id == user_id))).scalar_one()
    return default_allowance if override is None else int(override)


async def read_balances(session: AsyncSession, ask: HoldAsk, month: str, default_allowance: int) -> Balances:
    """Lock the counters a Hold of this user and key touches (month, then Budgets) and read them."""
    allowance = await _allowance(session, ask.user_id, default_allowance)
    used = await _lock_month(session, ask.user_id, month)
    budgets = await _lock_budgets(session, ask.user_id, ask.key_id)
    return Balances(allowance=allowance, allowance_left=max(0, allowance - used),
                    budget_left=budgets.get(None, 0),
                    key_left=budgets.get(ask.key_id) if ask.key_id in budgets and ask.key_id else None)


def _floor0(column: Any, change: Any) -> Any:
    """column + change, but never below 0: usage past a Hold is taken down to 0."""
    return case((column + change < 0, 0), else_=column + change)


async def _charge(session: AsyncSession, user_id: uuid.UUID, month: str, pays_from: PaysFrom,
                  key_id: uuid.UUID | None, tokens: int) -> None:
    """Take `tokens` (give them back when negative) where the Hold pays, and from the key's Budget."""
    usage, budgets = MonthlyUsage.__table__, Budget.__table__
    if pays_from is PaysFrom.allowance:
        await session.execute(update(usage).where(usage.c.user_id == user_id, usage.c.month == month)
                              .values(used=_floor0(usage.c.used, tokens)))
    else:
        await session.execute(update(budgets).where(budgets.c.user_id == user_id, budgets.c.key_id.is_(None))
                              .values(tokens=_floor0(budgets.c.tokens, -tokens)))
    if key_id is not None:
        await session.execute(update(budgets).where(budgets.c.key_id == key_id)
                              .values(tokens=_floor0(budgets.c.tokens, -tokens)))


async def take_hold(session: AsyncSession, ask: HoldAsk, *, default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE,
                    now: datetime | None = None) -> Held | Shortfall:
    """Hold the request's tokens, lowering max_tokens when `ask.may_lower`; one transaction."""
    now = now or utcnow()
    month = month_of(now)
    balances = await read_balances(session, ask, month, default_allowance)
    max_tokens = ask.max_tokens
    pays_from = balances.fits(ask.tokens())
    if pays_from is None and ask.may_lower:
        max_tokens = lowered_max_tokens(ask, balances)
        pays_from = balances.fits(ask.tokens(max_tokens)) if max_tokens else None
    if pays_from is None:
        await session.rollback()
        return _shortfall(ask, balances, now)
    tokens = ask.tokens(max_tokens)
    key_budget = balances.key_left is not None
    await _charge(session, ask.user_id, month, pays_from, ask.key_id if key_budget else None, tokens)
    hold_id = uuid7()
    await session.execute(insert(Hold.__table__).values(
        id=hold_id, user_id=ask.user_id, key_id=ask.key_id, source=ask.source.value, model=ask.model,
        request_id=ask.request_id, month=month, tokens=tokens, pays_from=pays_from.value, prompt_tokens=ask.prompt_tokens,
        key_budget=key_budget, state=HoldState.held.value, status=UsageStatus.running.value, used=0,
        owner=ask.owner, lease_until=now + timedelta(seconds=ask.lease_s), created_at=now))
    await session.commit()
    return Held(hold_id, tokens, max_tokens, pays_from)


async def check_hold(session: AsyncSession, ask: HoldAsk, *, default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE,
                     now: datetime | None = None) -> Shortfall | None:
    """Whether the tokens could hold `ask` now, holding nothing (background work's submit)."""
    now = now or utcnow()
    balances = await read_balances(session, ask, month_of(now), default_allowance)
    await session.rollback()
    return None if balances.fits(ask.tokens()) else _shortfall(ask, balances, now)


def _shortfall(ask: HoldAsk, balances: Balances, now: datetime) -> Shortfall:
    key_short = balances.key_left is not None and ask.tokens(1) > balances.key_left
    return Shortfall(ask.tokens(), key_short, balances.allowance, next_month_start(now))


async def end_hold(session: AsyncSession, hold_id: uuid.UUID, *, used: int | None, counting: Counting | None,
                   status: UsageStatus, now: datetime | None = None) -> bool:
    """Settle the Hold to `used` tokens, or release it (used None). False if it had ended already."""
    ended = await end_hold_within(session, hold_id, used=used, counting=counting, status=status, now=now)
    await (session.commit() if ended else session.rollback())
    return ended


async def end_hold_within(session: AsyncSession, hold_id: uuid.UUID, *, used: int | None,
                          counting: Counting | None, status: UsageStatus, now: datetime | None = None) -> bool:
    """end_hold inside the caller's transaction (which commits it with its own writes).

    The Hold's row is locked first, then only the counters it paid from, in
    the order take_hold locks them (month, the User's Budget, the key's).
    """
    table = Hold.__table__
    hold = (await session.execute(select(table).where(table.c.id == hold_id).with_for_update())).one()
    if hold.state != HoldState.held.value:
        return False
    spent = 0 if used is None else used
    # Back what was not used; past the Hold, take the rest down to 0.
    key_id = hold.key_id if hold.key_budget else None
    await _charge(session, hold.user_id, hold.month, PaysFrom(hold.pays_from), key_id, spent - hold.tokens)
    state = HoldState.released if used is None else HoldState.settled
    await session.execute(update(table).where(table.c.id == hold_id).values(
        state=state.value, used=spent, counting=counting.value if counting else None,
        status=status.value, ended_at=now or utcnow()))
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
