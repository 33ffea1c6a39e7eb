"""The ledger's hot path (take_hold_on / end_hold_on, no session): the same
Holds, rows and balances as the session API on both backends, no overspend
with one User under many Holds at once on PostgreSQL, and a dead pooled
connection that fails no Hold."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from sqlalchemy import select, text
from sqlalchemy.exc import NoResultFound

from ledger.store.db import make_engine, session_factory
from ledger.tokens.grants import standing
from ledger.store.ids import uuid7
from ledger.tokens.tables import Counting, Hold, PaysFrom, UsageStatus
from ledger.tokens import holds as tokens
from ledger.tokens.holds import HoldAsk, Held, Shortfall, end_hold, end_hold_on, take_hold, take_hold_on
from tests.ledger_fixtures import db_url, pg_url  # noqa: F401
from tests.ledger_fixtures import user_with_tokens

NOV = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
DEC = datetime(2026, 12, 1, 0, 5, tzinfo=timezone.utc)
# Columns a Hold's row has that differ between two equal Holds.
OWN_COLUMNS = {"id", "user_id", "key_id", "request_id"}


class Ledger:
    """One way to take and end Holds: "session" (take_hold / end_hold) or "hot" (on the engine)."""

    def __init__(self, engine: Any, path: str) -> None:
        self.engine, self.path = engine, path
        self.sessions = session_factory(engine)

    async def hold(self, ask: HoldAsk, now: datetime = NOV) -> Held | Shortfall:
        if self.path == "hot":
            return await take_hold_on(self.engine, ask, now=now)
        async with self.sessions() as session:
            return await take_hold(session, ask, now=now)

    async def end(self, hold_id: Any, used: int | None, counting: Counting | None = Counting.reported,
                  status: UsageStatus = UsageStatus.completed, now: datetime = NOV) -> bool:
        if self.path == "hot":
            return await end_hold_on(self.engine, hold_id, used=used, counting=counting, status=status, now=now)
        async with self.sessions() as session:
            return await end_hold(session, hold_id, used=used, counting=counting, status=status, now=now)


@pytest_asyncio.fixture
async def write_engine(db_url: str) -> Any:  # noqa: F811
    engine = make_engine(db_url)
    yield engine.execution_options(sqlite_begin="IMMEDIATE")
    await engine.dispose()


async def new_user(engine: Any, allowance: int | None = None, budget: int = 0, key_budget: int = 0) -> tuple:
    return await user_with_tokens(session_factory(engine), allowance, budget, key_budget)


def sky(user_id: Any, key_id: Any, max_tokens: int, may_lower: bool = True, choices: int = 1) -> HoldAsk:
    return HoldAsk(user_id=user_id, key_id=key_id, model="tiny-llama", prompt_tokens=4 * choices, choices=choices,
                   max_tokens=max_tokens, may_lower=may_lower, request_id="r", owner="o", lease_s=30.0)


async def standing_of(engine: Any, user: Any, key: Any = None, now: datetime = NOV) -> tuple:
    async with session_factory(engine)() as session:
        s = await standing(session, user, key, now=now)
    return s.allowance_used, s.budget, s.key_budget


async def hold_rows(engine: Any, user: Any) -> list[dict]:
    async with session_factory(engine)() as session:
        rows = (await session.execute(select(Hold.__table__).where(Hold.__table__.c.user_id == user)
                                      .order_by(Hold.__table__.c.created_at, Hold.__table__.c.id))).mappings()
        return [{k: v for k, v in row.items() if k not in OWN_COLUMNS} for row in rows]


async def story(ledger: Ledger) -> tuple[list, list]:
    """Every rule once: lowered, shortfalls, Budget, key Budget, settle, release, past the Hold, months."""
    seen: list = []
    a_user, a_key = await new_user(ledger.engine, allowance=25)
    seen.append(await ledger.hold(sky(a_user, a_key, 200)))                    # lowered to 21
    seen.append(await ledger.hold(sky(a_user, a_key, 200, may_lower=False)))   # shortfall
    seen.append(await ledger.hold(sky(a_user, a_key, 2, choices=2)))           # not one token per choice
    b_user, b_key = await new_user(ledger.engine, allowance=10, budget=100, key_budget=60)
    held = await ledger.hold(sky(b_user, b_key, 20))                           # Budget and key Budget
    seen.append(held)
    seen.append(await ledger.end(held.hold_id, 90))                            # past the Hold: down to 0
    seen.append(await ledger.end(held.hold_id, 5))                             # ends once
    seen.append(await ledger.hold(sky(b_user, b_key, 200)))                    # the key's Budget is out
    c_user, c_key = await new_user(ledger.engine, allowance=100)
    held = await ledger.hold(sky(c_user, c_key, 50))
    seen.append(await ledger.end(held.hold_id, 4, now=DEC))                    # back to the month it began in
    held = await ledger.hold(sky(c_user, c_key, 10))
    seen.append(await ledger.end(held.hold_id, None, None, UsageStatus.failed))  # released
    held = await ledger.hold(sky(c_user, c_key, 10))
    seen.append(await ledger.end(held.hold_id, 14, Counting.held, UsageStatus.stopped))
    seen.append(await ledger.hold(sky(c_user, None, 10), now=DEC))             # no key
    d_user, d_key = await new_user(ledger.engine, allowance=0, budget=100)     # the Budget, no key Budget
    held = await ledger.hold(sky(d_user, d_key, 20))
    seen.append(await ledger.end(held.hold_id, 10))                            # 14 back
    held = await ledger.hold(sky(d_user, d_key, 20))
    seen.append(await ledger.end(held.hold_id, 200))                           # past the Hold: down to 0
    balances = [await standing_of(ledger.engine, a_user, a_key), await standing_of(ledger.engine, b_user, b_key),
                await standing_of(ledger.engine, c_user, c_key), await standing_of(ledger.engine, c_user, now=DEC),
                await standing_of(ledger.engine, d_user, d_key)]
    rows = [await hold_rows(ledger.engine, u) for u in (a_user, b_user, c_user, d_user)]
    return [strip(r) for r in seen] + balances, rows


def strip(result: Any) -> Any:
    if isinstance(result, Held):
        return ("held", result.tokens, result.max_tokens, result.pays_from)
    return result


async def test_the_hot_path_does_what_the_session_api_does(write_engine: Any) -> None:
    session_seen, session_rows = await story(Ledger(write_engine, "session"))
    hot_seen, hot_rows = await story(Ledger(write_engine, "hot"))
    assert hot_seen == session_seen
    assert hot_rows == session_rows
    assert session_seen[0] == ("held", 25, 21, PaysFrom.allowance)
    assert session_seen[3] == ("held", 24, 20, PaysFrom.budget)
    assert session_seen[4:6] == [True, False]
    # b: the Budget 100 - 24 + 24 - 90 -> 10; the key's 60 - 90 -> 0.
    assert session_seen[-5] == (25, 0, None)
    assert session_seen[-4] == (0, 10, 0)
    assert session_seen[-3] == (4 + 14, 0, None)  # December's settle went back to November
    assert session_seen[-2] == (14, 0, None)
    assert session_seen[-1] == (0, 0, None)  # 100 - 10, then 90 - 200 -> 0


async def test_on_postgresql_a_hold_that_fits_the_allowance_is_one_statement(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Only a Hold the one statement cannot decide takes the transaction, and the Holds are right either way."""
    engine = make_engine(pg_url)
    run = tokens._DriverCounters._run
    statements: list = []

    async def recorded(self: Any, statement: Any, params: dict) -> list:
        rows = await run(self, statement, params)
        statements.append((statement, bool(rows)))
        return rows

    monkeypatch.setattr(tokens._DriverCounters, "_run", recorded)

    async def hold(ask: HoldAsk) -> tuple:
        statements.clear()
        result = await take_hold_on(engine, ask, now=NOV)
        one = [(statement is tokens._TAKE_IN_ONE, taken) for statement, taken in statements]
        return strip(result), one[0], len(one) > 1

    try:
        user, key = await new_user(engine, allowance=100)
        # (the result, (the one statement ran, it took the Hold), the transaction ran too)
        assert await hold(sky(user, key, 30)) == (("held", 34, 30, PaysFrom.allowance), (True, False), True)  # no month row yet
        assert await hold(sky(user, key, 30)) == (("held", 34, 30, PaysFrom.allowance), (True, True), False)
        assert await hold(sky(user, None, 20)) == (("held", 24, 20, PaysFrom.allowance), (True, True), False)  # 92 used
        assert await hold(sky(user, key, 30)) == (("held", 8, 4, PaysFrom.allowance), (True, False), True)  # lowered
        assert await hold(sky(user, key, 1)) == (Shortfall(5, False, 100, datetime(2026, 12, 1, tzinfo=timezone.utc)),
                                                 (True, False), True)
        assert (await standing_of(engine, user, key))[0] == 100
        b_user, b_key = await new_user(engine, allowance=1000, key_budget=50)
        await hold(sky(b_user, None, 10))  # the month's row
        assert await hold(sky(b_user, None, 10)) == (("held", 14, 10, PaysFrom.allowance), (True, True), False)
        assert await hold(sky(b_user, b_key, 10)) == (("held", 14, 10, PaysFrom.allowance), (True, False), True)
        assert await standing_of(engine, b_user, b_key) == (42, 0, 50 - 14)  # the key's Budget paid too
        rows = await hold_rows(engine, b_user)
        assert [(r["tokens"], r["key_budget"], r["state"]) for r in rows] == [(14, False, "held")] * 2 + [
            (14, True, "held")]
    finally:
        await engine.dispose()


async def test_ending_a_hold_that_does_not_exist_raises(write_engine: Any) -> None:
    for path in ("session", "hot"):
        with pytest.raises(NoResultFound):
            await Ledger(write_engine, path).end(uuid7(), 3)


@pytest.mark.parametrize("with_key_budget", [False, True])
async def test_one_user_with_many_holds_at_once_never_overspends(
        pg_url: str, with_key_budget: bool) -> None:  # noqa: F811
    """300 Hold + settle pairs at once on one User, hot path and session API mixed (one lock order)."""
    engine = make_engine(pg_url, pool_size=20, max_overflow=10)
    try:
        limit = 100 * 54
        user, key = await new_user(engine, allowance=0 if with_key_budget else limit,
                                   budget=10**9 if with_key_budget else 0, key_budget=limit if with_key_budget else 0)
        ledgers = [Ledger(engine, "hot"), Ledger(engine, "session")]
        worst = 0

        async def pair(i: int) -> int:
            ledger = ledgers[i % 3 == 0]
            result = await ledger.hold(sky(user, key, 50))
            if isinstance(result, Shortfall):
                return 0
            used = max(0, result.tokens - i % 7)
            assert await ledger.end(result.hold_id, used)
            return used

        async def watch() -> None:
            nonlocal worst
            async with engine.connect() as connection:
                while True:
                    row = (await connection.execute(text(
                        "SELECT m.used, b.tokens FROM users u LEFT JOIN monthly_usage m ON m.user_id = u.id "
                        "LEFT JOIN budgets b ON b.key_id = :key WHERE u.id = :user"), {"user": user, "key": key})).one()
                    await connection.rollback()
                    spent = (limit - (row[1] or 0)) if with_key_budget else (row[0] or 0)
                    worst = max(worst, spent)
                    await asyncio.sleep(0.005)

        watcher = asyncio.ensure_future(watch())
        try:
            spent = sum(await asyncio.gather(*[pair(i) for i in range(300)]))
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        used, budget, key_left = await standing_of(engine, user, key)
        assert worst <= limit
        if with_key_budget:
            assert key_left == limit - spent and key_left >= 0 and used == 0
        else:
            assert used == spent <= limit and budget == 0
        async with session_factory(engine)() as session:
            states = (await session.execute(text("SELECT state, count(*) FROM holds WHERE user_id = :u GROUP BY state"),
                                            {"u": user})).all()
        assert {state for state, _ in states} == {"settled"}
        assert spent > limit // 2  # the tokens were used, not refused
    finally:
        await engine.dispose()


async def test_a_dead_pooled_connection_fails_no_hold(pg_url: str) -> None:  # noqa: F811
    """A Postgres restart (here: every backend of the pool terminated) must not fail the next Hold."""
    engine = make_engine(pg_url, pool_size=2, max_overflow=0)
    try:
        user, key = await new_user(engine, allowance=1000)
        ledger = Ledger(engine, "hot")
        held = await ledger.hold(sky(user, key, 10))
        admin = await asyncpg.connect(pg_url.replace("postgresql+asyncpg://", "postgresql://", 1))
        try:
            killed = await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        finally:
            await admin.close()
        assert killed >= 1
        await asyncio.sleep(0.2)
        assert await ledger.end(held.hold_id, 3)
        assert isinstance(await ledger.hold(sky(user, key, 10)), Held)
        assert await Ledger(engine, "session").hold(sky(user, key, 10))
        assert (await standing_of(engine, user, key))[0] == 3 + 14 + 14
    finally:
        await engine.dispose()


async def test_a_hold_cancelled_while_it_waits_for_a_lock_holds_nothing(pg_url: str) -> None:  # noqa: F811
    """A client gone while its Hold waits on the month's row: no Hold, no charge, a sound pool after."""
    engine = make_engine(pg_url, pool_size=2, max_overflow=0)
    try:
        user, key = await new_user(engine, allowance=1000)
        ledger = Ledger(engine, "hot")
        first = await ledger.hold(sky(user, key, 10))  # the month's row exists
        async with engine.connect() as blocker:
            await blocker.execute(text("SELECT used FROM monthly_usage WHERE user_id = :u FOR UPDATE"), {"u": user})
            waiting = asyncio.ensure_future(ledger.hold(sky(user, key, 10)))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await blocker.rollback()
        assert await ledger.end(first.hold_id, 2)
        for _ in range(3):  # every connection of the pool works
            held = await ledger.hold(sky(user, key, 10))
            assert await ledger.end(held.hold_id, 1)
        assert (await standing_of(engine, user, key))[0] == 2 + 3
        assert len(await hold_rows(engine, user)) == 4
    finally:
        await engine.dispose()


@pytest_asyncio.fixture
async def sqlite_url(tmp_path: Any) -> str:
    from ledger.store.migrate import upgrade

    url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    await upgrade(url)
    return url


async def test_on_sqlite_a_hold_cancelled_while_it_waits_for_the_write_lock_holds_nothing(sqlite_url: str) -> None:
    """SQLite's counterpart of the lock wait above: the Hold's BEGIN IMMEDIATE waits in aiosqlite's
    thread while another writer holds the lock. Cut there, its connection may still be inside that
    statement, so it leaves the pool: no Hold, no charge, and every connection works after."""
    engine = make_engine(sqlite_url, pool_size=2, max_overflow=0).execution_options(sqlite_begin="IMMEDIATE")
    try:
        user, key = await new_user(engine, allowance=1000)
        ledger = Ledger(engine, "hot")
        first = await ledger.hold(sky(user, key, 10))
        async with engine.connect() as blocker:
            await blocker.execute(text("UPDATE monthly_usage SET used = used WHERE user_id = :u"), {"u": user.hex})
            waiting = asyncio.ensure_future(ledger.hold(sky(user, key, 10)))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            waiting.cancel()
            await blocker.rollback()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert await ledger.end(first.hold_id, 2)
        for _ in range(3):  # every connection of the pool works, none is left inside a transaction
            held = await ledger.hold(sky(user, key, 10))
            assert await ledger.end(held.hold_id, 1)
        assert (await standing_of(engine, user, key))[0] == 2 + 3
        async with session_factory(engine)() as session:
            states = (await session.execute(text("SELECT state, count(*) FROM holds GROUP BY state"))).all()
        assert dict(states) == {"settled": 4}
    finally:
        await engine.dispose()


async def test_on_sqlite_a_failed_statement_rolls_the_whole_hold_back(sqlite_url: str) -> None:
    """A Hold whose INSERT fails (here: a User that does not exist, against the foreign key) charges
    nothing, and its connection goes back to the pool out of its transaction."""
    engine = make_engine(sqlite_url, pool_size=1, max_overflow=0).execution_options(sqlite_begin="IMMEDIATE")
    try:
        user, key = await new_user(engine, allowance=1000)
        ledger = Ledger(engine, "hot")
        with pytest.raises(Exception, match="FOREIGN KEY"):
            await ledger.hold(sky(uuid7(), key, 10))
        held = await ledger.hold(sky(user, key, 10))  # the pool's one connection, usable
        assert await ledger.end(held.hold_id, 5)
        assert (await standing_of(engine, user, key))[0] == 5
        async with engine.connect() as connection:
            months = (await connection.execute(text("SELECT count(*) FROM monthly_usage"))).scalar_one()
        assert months == 1  # the failed Hold's month row went with its transaction
    finally:
        await engine.dispose()
