"""Holds: the money logic of the ledger.

A Hold reserves the most tokens a request can use, in one transaction
with row locks on every counter it touches (the User's month, the User's
Budget, the key's own Budget), always in that order, so concurrent
requests never hold more than there is and never deadlock. The month's
row is locked by every Hold of the User, so it orders them all. It is taken
whole from this month's allowance when it fits there, else from the
Budget; a key with its own Budget pays there too. Each Hold ends once:
settled to what the request used, or released.

Two ways in, one set of statements: `take_hold` / `end_hold` in the caller's
session, and the hot path the API takes, `take_hold_on` / `end_hold_on` on an
engine, no session: on PostgreSQL they run on the pool's asyncpg connection (ledger/store/pooled_driver.py)
as prepared statements (a Hold that fits in the month's allowance, of a key
without a Budget of its own, in a month already begun: one statement; any
other Hold: BEGIN, 3 statements, COMMIT; its end: one statement, or BEGIN,
2-3, COMMIT when a key's Budget paid too), and on SQLite on the pool's
aiosqlite connection (ledger/store/sqlite_driver.py).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, TypeVar
from datetime import datetime, timedelta, timezone

from sqlalchemy import bindparam, case, exists, func, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import NoResultFound
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.store.coltypes import utcnow
from ledger.store.columns import table_of
from ledger.store import driver_sql
from ledger.store import pooled_driver
from ledger.store import sqlite_driver
from ledger.store.ids import uuid7
from ledger.accounts.tables import User
from ledger.tokens.tables import Budget, Counting, Hold, HoldState, MonthlyUsage, PaysFrom, UsageSource, UsageStatus

DEFAULT_MONTHLY_ALLOWANCE = 5_000_000
T = TypeVar("T")


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


# -- the statements, built once at import ---------------------------------------
# Built once, each statement's cache key is computed from the same objects and
# SQLAlchemy's compiled cache hits; on PostgreSQL the hot path runs them on the
# driver's connection, compiled once (below), as prepared statements.
_usage, _budgets, _holds, _users = table_of(MonthlyUsage), table_of(Budget), table_of(Hold), table_of(User)


def _floor0(value: Any) -> Any:
    """Never below 0: usage past a Hold is taken down to 0."""
    return case((value < 0, 0), else_=value)


def _allowance() -> Any:
    return select(_users.c.monthly_allowance).where(_users.c.id == bindparam("uid")).scalar_subquery()


def _month_upsert(insert_of: Any) -> Any:
    """This month's allowance used, its row made if needed and locked, with the User's own allowance."""
    statement = insert_of(_usage).values(user_id=bindparam("uid"), month=bindparam("mon"), used=0)
    return statement.on_conflict_do_update(
        index_elements=[_usage.c.user_id, _usage.c.month], set_={"used": _usage.c.used},
    ).returning(_usage.c.used, _allowance())


def _budgets_query(with_key: bool) -> Any:
    """The User's Budget (key None) and the key's own, locked in one fixed order."""
    owners = _budgets.c.key_id.is_(None)
    if with_key:
        owners = or_(owners, _budgets.c.key_id == bindparam("kid"))
    return (select(_budgets.c.key_id, _budgets.c.tokens).where(_budgets.c.user_id == bindparam("uid"), owners)
            .order_by(_budgets.c.key_id.is_not(None)).with_for_update())


# The month's row locked as it is (no new row version), else made by the upsert, once a month.
_MONTH_LOCK = (select(_usage.c.used, _allowance())
               .where(_usage.c.user_id == bindparam("uid"), _usage.c.month == bindparam("mon"))
               .with_for_update(of=_usage))
_MONTH = {"postgresql": _month_upsert(postgresql.insert), "sqlite": _month_upsert(sqlite.insert)}
_BUDGETS = {False: _budgets_query(False), True: _budgets_query(True)}
_CHARGE = {
    "month": update(_usage).where(_usage.c.user_id == bindparam("uid"), _usage.c.month == bindparam("mon"))
    .values(used=_floor0(_usage.c.used + bindparam("change"))),
    "budget": update(_budgets).where(_budgets.c.user_id == bindparam("uid"), _budgets.c.key_id.is_(None))
    .values(tokens=_floor0(_budgets.c.tokens - bindparam("change"))),
    "key": update(_budgets).where(_budgets.c.key_id == bindparam("kid"))
    .values(tokens=_floor0(_budgets.c.tokens - bindparam("change"))),
}
_HOLD_COLUMNS = ("id", "user_id", "key_id", "source", "model", "request_id", "month", "tokens", "pays_from",
                 "prompt_tokens", "key_budget", "state", "status", "used", "owner", "lease_until", "created_at")
_INSERT_HOLD = insert(_holds).values({name: bindparam(f"h_{name}") for name in _HOLD_COLUMNS})


def _hold_params(row: dict) -> dict:
    """The Hold's row as the parameters of the statements that insert it."""
    return {f"h_{name}": row[name] for name in _HOLD_COLUMNS}

# Ends a Hold still held and hands back what its counters need: the Hold's row is locked first.
_END_HOLD = (
    update(_holds).where(_holds.c.id == bindparam("hid"), _holds.c.state == HoldState.held.value)
    .values(state=bindparam("e_state"), used=bindparam("e_used"), counting=bindparam("e_counting"),
            status=bindparam("e_status"), ended_at=bindparam("e_ended_at"))
    .returning(_holds.c.user_id, _holds.c.month, _holds.c.pays_from, _holds.c.key_id, _holds.c.key_budget,
               _holds.c.tokens)
)
_HOLD_EXISTS = select(_holds.c.id).where(_holds.c.id == bindparam("hid"))


def _end_in_one() -> Any:
    """PostgreSQL: the end of a held Hold without a key Budget as ONE statement (its own transaction).

    The counter's UPDATE joins the ended Hold, so it locks its row only after
    the Hold's: take_hold's order, as in end_hold. A Hold that pays a key's
    Budget too touches two counters, whose order within one statement would
    not be fixed: it (and an ended or unknown Hold) returns no row here and
    takes the usual transaction.
    """
    ended = _END_HOLD.where(_holds.c.key_budget.is_(False)).cte("ended")
    back = bindparam("e_used") - ended.c.tokens  # what goes back (negative: what is taken past the Hold)
    month = (update(_usage).where(_usage.c.user_id == ended.c.user_id, _usage.c.month == ended.c.month,
                                  ended.c.pays_from == PaysFrom.allowance.value)
             .values(used=_floor0(_usage.c.used + back)))
    budget = (update(_budgets).where(_budgets.c.user_id == ended.c.user_id, _budgets.c.key_id.is_(None),
                                     ended.c.pays_from == PaysFrom.budget.value)
              .values(tokens=_floor0(_budgets.c.tokens - back)))
    return select(ended.c.tokens).add_cte(month.cte("month_back")).add_cte(budget.cte("budget_back"))


_END_IN_ONE = _end_in_one()


def _take_in_one() -> Any:
    """PostgreSQL: the usual Hold as ONE statement (its own transaction): the month's row charged
    only if the Hold fits in what is left of the allowance, and the Hold's row inserted only if it was.

    The UPDATE locks the month's row first, as take_hold does, and PostgreSQL checks its condition
    again on the row's newest version after any wait for that lock, so two Holds never both take the
    last tokens. A Hold this does not cover (no month row yet, a key with a Budget of its own, more
    than the allowance has left) returns no row and takes the usual transaction, which decides it.
    """
    tokens = bindparam("h_tokens", type_=_holds.c.tokens.type)
    allowance = func.coalesce(_allowance(), bindparam("dflt"))
    key_budget = exists().where(_budgets.c.user_id == bindparam("uid"), _budgets.c.key_id == bindparam("kid"))
    charged = (update(_usage)
               .where(_usage.c.user_id == bindparam("uid"), _usage.c.month == bindparam("mon"),
                      _usage.c.used + tokens <= allowance, ~key_budget)
               .values(used=_usage.c.used + tokens).returning(_usage.c.user_id).cte("charged"))
    values = select(*[bindparam(f"h_{name}", type_=_holds.c[name].type) for name in _HOLD_COLUMNS])
    return insert(_holds).from_select(list(_HOLD_COLUMNS), values.select_from(charged)).returning(_holds.c.id)


_TAKE_IN_ONE = _take_in_one()


class _Counters:
    """The ledger's statements on one transaction; `_run` executes one and returns its rows."""

    dialect = "postgresql"

    async def _run(self, statement: Any, params: dict) -> list:
        raise NotImplementedError

    async def month(self, user_id: uuid.UUID, month: str) -> tuple[int, int | None]:
        """Lock this month's row (made if needed): its used tokens, and the User's own allowance."""
        params = {"uid": user_id, "mon": month}
        rows = await self._run(_MONTH_LOCK, params) or await self._run(_MONTH[self.dialect], params)
        used, allowance = rows[0]
        return int(used), None if allowance is None else int(allowance)

    async def budgets(self, user_id: uuid.UUID, key_id: uuid.UUID | None) -> dict:
        params = {"uid": user_id} if key_id is None else {"uid": user_id, "kid": key_id}
        return {row[0]: int(row[1]) for row in await self._run(_BUDGETS[key_id is not None], params)}

    async def charge(self, user_id: uuid.UUID, month: str, pays_from: PaysFrom, key_id: uuid.UUID | None,
                     tokens: int) -> None:
        """Take `tokens` (give them back when negative) where the Hold pays, and from the key's Budget."""
        if pays_from is PaysFrom.allowance:
            await self._run(_CHARGE["month"], {"uid": user_id, "mon": month, "change": tokens})
        else:
            await self._run(_CHARGE["budget"], {"uid": user_id, "change": tokens})
        if key_id is not None:
            await self._run(_CHARGE["key"], {"kid": key_id, "change": tokens})

    async def insert_hold(self, row: dict) -> None:
        await self._run(_INSERT_HOLD, _hold_params(row))

    async def charge_and_insert(self, row: dict) -> None:
        """The Hold's charge (its counters are locked already), then its row."""
        key_id = row["key_id"] if row["key_budget"] else None
        await self.charge(row["user_id"], row["month"], PaysFrom(row["pays_from"]), key_id, row["tokens"])
        await self.insert_hold(row)

    async def end_hold(self, hold_id: uuid.UUID, values: dict) -> Any:
        """The ended Hold's (user_id, month, pays_from, key_id, key_budget, tokens), None if not held."""
        rows = await self._run(_END_HOLD, {"hid": hold_id, **{f"e_{k}": v for k, v in values.items()}})
        if rows:
            return rows[0]
        if not await self._run(_HOLD_EXISTS, {"hid": hold_id}):
            raise NoResultFound(f"no Hold {hold_id}")
        return None


class _CoreCounters(_Counters):
    """Through SQLAlchemy's connection (an AsyncSession's, or an AsyncConnection), on either dialect."""

    def __init__(self, connection: AsyncConnection) -> None:
        self.connection, self.dialect = connection, connection.dialect.name

    async def _run(self, statement: Any, params: dict) -> list:
        result = await self.connection.execute(statement, params)
        return list(result) if result.returns_rows else []


class _DriverCounters(_Counters):
    """PostgreSQL: the same statements, compiled once, on the asyncpg connection (prepared statements)."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver

    async def charge_and_insert(self, row: dict) -> None:
        """One statement: the charges as CTEs of the Hold's INSERT. Every row they update is locked
        by this transaction already (month, then Budgets), so their order within it cannot matter."""
        statement = _CHARGED_INSERT[(PaysFrom(row["pays_from"]), bool(row["key_budget"]))]
        params = _hold_params(row)
        params.update(uid=row["user_id"], mon=row["month"], kid=row["key_id"], change=row["tokens"])
        await self._run(statement, params)

    async def take_in_one(self, row: dict, default_allowance: int) -> bool:
        """True if the Hold (`row`, paid from the allowance) was taken in one statement (see _take_in_one)."""
        params = _hold_params(row)
        params.update(uid=row["user_id"], mon=row["month"], kid=row["key_id"], dflt=default_allowance)
        return bool(await self._run(_TAKE_IN_ONE, params))

    async def end_in_one(self, hold_id: uuid.UUID, values: dict) -> bool:
        """True if the Hold ended in one statement, outside any transaction (see _end_in_one)."""
        return bool(await self._run(_END_IN_ONE, {"hid": hold_id, **{f"e_{k}": v for k, v in values.items()}}))

    async def _run(self, statement: Any, params: dict) -> list:
        return await driver_sql.fetch_asyncpg(self.driver, statement, params)


class _SqliteDriverCounters(_Counters):
    """SQLite (the embedded default): the same statements, compiled once, on the aiosqlite
    connection itself (ledger/store/sqlite_driver.py)."""

    dialect = "sqlite"

    def __init__(self, driver: Any, engine_dialect: Any) -> None:
        self.driver, self.engine_dialect = driver, engine_dialect

    async def _run(self, statement: Any, params: dict) -> list:
        return await driver_sql.fetch_aiosqlite(self.driver, self.engine_dialect, statement, params)


def _charged_insert(pays_from: PaysFrom, key_budget: bool) -> Any:
    charges = [_CHARGE["month" if pays_from is PaysFrom.allowance else "budget"]]
    charges += [_CHARGE["key"]] if key_budget else []
    statement = _INSERT_HOLD
    for i, charge in enumerate(charges):
        statement = statement.add_cte(charge.cte(f"charge_{i}"))
    return statement


_CHARGED_INSERT = {(p, k): _charged_insert(p, k) for p in PaysFrom for k in (False, True)}


# -- a Hold and its end ------------------------------------------------------------
async def read_balances(session: AsyncSession, ask: HoldAsk, month: str, default_allowance: int) -> Balances:
    """Lock the counters a Hold of this user and key touches (month, then Budgets) and read them."""
    return await _read_balances(_CoreCounters(await session.connection()), ask, month, default_allowance)


async def _read_balances(counters: _Counters, ask: HoldAsk, month: str, default_allowance: int) -> Balances:
    used, override = await counters.month(ask.user_id, month)
    budgets = await counters.budgets(ask.user_id, ask.key_id)
    allowance = default_allowance if override is None else override
    return Balances(allowance=allowance, allowance_left=max(0, allowance - used),
                    budget_left=budgets.get(None, 0),
                    key_left=budgets.get(ask.key_id) if ask.key_id in budgets and ask.key_id else None)


def _hold_row(ask: HoldAsk, hold_id: uuid.UUID, month: str, tokens: int, pays_from: PaysFrom, key_budget: bool,
              now: datetime) -> dict:
    return dict(
        id=hold_id, user_id=ask.user_id, key_id=ask.key_id, source=ask.source.value, model=ask.model,
        request_id=ask.request_id, month=month, tokens=tokens, pays_from=pays_from.value,
        prompt_tokens=ask.prompt_tokens, key_budget=key_budget, state=HoldState.held.value,
        status=UsageStatus.running.value, used=0, owner=ask.owner, lease_until=now + timedelta(seconds=ask.lease_s),
        created_at=now)


async def _take(counters: _Counters, ask: HoldAsk, default_allowance: int, now: datetime) -> Held | Shortfall:
    """The Hold's statements; the caller commits a Held and rolls a Shortfall back."""
    month = month_of(now)
    balances = await _read_balances(counters, ask, month, default_allowance)
    max_tokens = ask.max_tokens
    pays_from = balances.fits(ask.tokens())
    if pays_from is None and ask.may_lower:
        max_tokens = lowered_max_tokens(ask, balances)
        pays_from = balances.fits(ask.tokens(max_tokens)) if max_tokens else None
    if pays_from is None:
        return _shortfall(ask, balances, now)
    tokens = ask.tokens(max_tokens)
    key_budget = balances.key_left is not None
    hold_id = uuid7()
    await counters.charge_and_insert(_hold_row(ask, hold_id, month, tokens, pays_from, key_budget, now))
    return Held(hold_id, tokens, max_tokens, pays_from)


def _end_values(used: int | None, counting: Counting | None, status: UsageStatus, now: datetime | None) -> dict:
    """The ended Hold's columns: settled to `used`, or released (used None) at 0."""
    state = HoldState.released if used is None else HoldState.settled
    return dict(state=state.value, used=0 if used is None else used, counting=counting.value if counting else None,
                status=status.value, ended_at=now or utcnow())


async def _end(counters: _Counters, hold_id: uuid.UUID, used: int | None, counting: Counting | None,
               status: UsageStatus, now: datetime | None) -> bool:
    """The Hold's row is locked first, then only the counters it paid from, in take_hold's order."""
    spent = 0 if used is None else used
    hold = await counters.end_hold(hold_id, _end_values(used, counting, status, now))
    if hold is None:
        return False
    user_id, month, pays_from, key_id, key_budget, tokens = hold
    # Back what was not used; past the Hold, take the rest down to 0.
    await counters.charge(user_id, month, PaysFrom(pays_from), key_id if key_budget else None, spent - tokens)
    return True


async def take_hold(session: AsyncSession, ask: HoldAsk, *, default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE,
                    now: datetime | None = None) -> Held | Shortfall:
    """Hold the request's tokens, lowering max_tokens when `ask.may_lower`; one transaction."""
    result = await _take(_CoreCounters(await session.connection()), ask, default_allowance, now or utcnow())
    await (session.commit() if isinstance(result, Held) else session.rollback())
    return result


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
    """end_hold inside the caller's transaction (which commits it with its own writes)."""
    return await _end(_CoreCounters(await session.connection()), hold_id, used, counting, status, now)


# -- the hot path: on an engine, no session ------------------------------------------
async def take_hold_on(engine: AsyncEngine, ask: HoldAsk, *, default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE,
                       now: datetime | None = None) -> Held | Shortfall:
    """take_hold in its own transaction on a connection of `engine`'s pool (the API's Holds)."""
    now = now or utcnow()
    if engine.dialect.name == "postgresql":
        # The row, its id among it, is made once: a try repeated on another connection (pooled_driver)
        # inserts the same id, so a Hold whose first try got through is refused, never taken twice.
        row = _hold_row(ask, uuid7(), month_of(now), ask.tokens(), PaysFrom.allowance, False, now)
        if await _on_driver(engine, lambda c: c.take_in_one(row, default_allowance)):
            return Held(row["id"], row["tokens"], ask.max_tokens, PaysFrom.allowance)
    return await _in_transaction(engine, lambda c: _take(c, ask, default_allowance, now),
                                 lambda result: isinstance(result, Held))


async def end_hold_on(engine: AsyncEngine, hold_id: uuid.UUID, *, used: int | None, counting: Counting | None,
                      status: UsageStatus, now: datetime | None = None) -> bool:
    """end_hold in its own transaction on a connection of `engine`'s pool (the API's settlements)."""
    if engine.dialect.name == "postgresql":
        values = _end_values(used, counting, status, now)
        if await _on_driver(engine, lambda c: c.end_in_one(hold_id, values)):
            return True
    return await _in_transaction(engine, lambda c: _end(c, hold_id, used, counting, status, now), bool)


async def _in_transaction(engine: AsyncEngine, work: Callable[[_Counters], Awaitable[T]],
                          keep: Callable[[T], bool]) -> T:
    """Run `work`, then commit when `keep(result)`, else roll back; an error rolls back."""
    if sqlite_driver.drives(engine):
        return await sqlite_driver.in_transaction(
            engine, lambda driver: work(_SqliteDriverCounters(driver, engine.dialect)), keep)
    if engine.dialect.name != "postgresql":
        # Another SQLite driver: its BEGIN comes from the engine's options (ledger.store.db).
        async with engine.connect() as connection:
            result = await work(_CoreCounters(connection))
            await (connection.commit() if keep(result) else connection.rollback())
            return result
    return await pooled_driver.in_transaction(engine, lambda driver: work(_DriverCounters(driver)), keep)


async def _on_driver(engine: AsyncEngine, work: Callable[[_DriverCounters], Awaitable[T]]) -> T:
    return await pooled_driver.one_statement(engine, lambda driver: work(_DriverCounters(driver)))


async def renew_leases(session: AsyncSession, owner: str, until: datetime) -> None:
    await session.execute(
        update(Hold).where(col(Hold.owner) == owner, col(Hold.state) == HoldState.held).values(lease_until=until)
    )
    await session.commit()


async def expired_holds(session: AsyncSession, now: datetime) -> list[uuid.UUID]:
    query = select(col(Hold.id)).where(col(Hold.state) == HoldState.held, col(Hold.lease_until) < now)
    ids = list((await session.execute(query)).scalars())
    await session.rollback()
    return ids
