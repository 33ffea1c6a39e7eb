"""Holds on both ledgers: allowance first, then Budget, never split; the
key's own Budget too; lowering max_tokens near the end; settlement rules."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import pytest
import pytest_asyncio

from ledger.store.db import make_engine, session_factory
from ledger.tokens.grants import grant, standing
from ledger.tokens.tables import Counting, PaysFrom, UsageStatus
from ledger.tokens.holds import HoldAsk, Held, Shortfall, end_hold, take_hold
from tests.ledger_fixtures import db_url, pg_url  # noqa: F401
from tests.ledger_fixtures import user_with_tokens as new_user

# Every Hold of these tests starts, ends and is read at NOV or a time given beside
# it, never at the real clock: the tests pass on any date.
NOV = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)


@pytest_asyncio.fixture
async def money(db_url: str) -> Any:  # noqa: F811
    """Sessions whose SQLite transactions take the write lock at BEGIN."""
    engine = make_engine(db_url)
    yield session_factory(engine.execution_options(sqlite_begin="IMMEDIATE"))
    await engine.dispose()


def sky(user_id: Any, key_id: Any, max_tokens: int, may_lower: bool = True, choices: int = 1) -> HoldAsk:
    return HoldAsk(user_id=user_id, key_id=key_id, model="tiny-llama", prompt_tokens=4 * choices,
                   choices=choices, max_tokens=max_tokens, may_lower=may_lower)


async def hold(money: Any, ask: HoldAsk, now: datetime = NOV) -> Held | Shortfall:
    async with money() as session:
        return await take_hold(session, ask, now=now)


async def test_the_sky_is_with_two_tokens_holds_six(money: Any) -> None:
    user, key = await new_user(money)
    held = await hold(money, sky(user, key, 2))
    assert isinstance(held, Held) and held.tokens == 6 and held.pays_from is PaysFrom.allowance
    async with money() as session:
        assert (await standing(session, user, now=NOV)).allowance_used == 6


async def test_twenty_five_left_lowers_two_hundred_to_twenty_one(money: Any) -> None:
    user, key = await new_user(money, allowance=25)
    held = await hold(money, sky(user, key, 200))
    assert isinstance(held, Held) and (held.max_tokens, held.tokens) == (21, 25)


async def test_a_hold_is_never_split(money: Any) -> None:
    user, key = await new_user(money, allowance=10, budget=100)
    held = await hold(money, sky(user, key, 20))
    assert isinstance(held, Held) and held.pays_from is PaysFrom.budget and held.tokens == 24
    async with money() as session:
        now = await standing(session, user, now=NOV)
    assert (now.allowance_used, now.budget) == (0, 76)


async def test_background_work_is_refused_rather_than_lowered(money: Any) -> None:
    user, key = await new_user(money, allowance=25)
    short = await hold(money, sky(user, key, 200, may_lower=False))
    assert isinstance(short, Shortfall) and short.tokens == 204 and not short.key_budget
    assert short.refills_on == datetime(2026, 12, 1, tzinfo=timezone.utc)


async def test_not_one_token_per_choice_is_a_shortfall(money: Any) -> None:
    user, key = await new_user(money, allowance=6)
    short = await hold(money, sky(user, key, 2, choices=2))
    assert isinstance(short, Shortfall) and short.tokens == 12


async def test_a_keys_own_budget_limits_it_too(money: Any) -> None:
    user, key = await new_user(money)
    async with money() as session:
        await grant(session, user, 10, key_id=key)
    held = await hold(money, sky(user, key, 200))
    assert isinstance(held, Held) and held.max_tokens == 6
    short = await hold(money, sky(user, key, 200))
    assert isinstance(short, Shortfall) and short.key_budget and short.tokens == 204


async def test_settling_gives_back_what_was_not_used(money: Any) -> None:
    user, key = await new_user(money, allowance=100)
    held = await hold(money, sky(user, key, 50))
    async with money() as session:
        assert await end_hold(session, held.hold_id, used=10, counting=Counting.reported,
                              status=UsageStatus.completed, now=NOV)
    async with money() as session:
        assert (await standing(session, user, now=NOV)).allowance_used == 10


async def test_a_hold_ends_once(money: Any) -> None:
    user, key = await new_user(money, allowance=100)
    held = await hold(money, sky(user, key, 50))
    async with money() as session:
        assert await end_hold(session, held.hold_id, used=None, counting=None, status=UsageStatus.failed,
                              now=NOV)
    async with money() as session:
        assert not await end_hold(session, held.hold_id, used=54, counting=Counting.held,
                                  status=UsageStatus.stopped, now=NOV)
    async with money() as session:
        assert (await standing(session, user, now=NOV)).allowance_used == 0


async def test_usage_past_the_hold_is_taken_down_to_zero(money: Any) -> None:
    user, key = await new_user(money, allowance=0, budget=30)
    held = await hold(money, sky(user, key, 20))
    async with money() as session:
        await end_hold(session, held.hold_id, used=90, counting=Counting.reported, status=UsageStatus.completed,
                       now=NOV)
    async with money() as session:
        assert (await standing(session, user, now=NOV)).budget == 0


async def test_a_hold_gives_back_to_the_month_it_started_in(money: Any) -> None:
    user, key = await new_user(money, allowance=100)
    held = await hold(money, sky(user, key, 50), now=NOV)
    async with money() as session:
        await end_hold(session, held.hold_id, used=4, counting=Counting.reported, status=UsageStatus.completed,
                       now=datetime(2026, 12, 1, 0, 5, tzinfo=timezone.utc))
    async with money() as session:
        assert (await standing(session, user, now=NOV)).allowance_used == 4
        assert (await standing(session, user, now=datetime(2026, 12, 2, tzinfo=timezone.utc))).allowance_used == 0


@pytest.mark.parametrize("with_key_budget", [False, True])
async def test_concurrent_holds_never_overspend(pg_url: str, with_key_budget: bool) -> None:  # noqa: F811
    """200 requests at once against tokens that hold about half of them."""
    engine = make_engine(pg_url, pool_size=20, max_overflow=20)
    money = session_factory(engine)
    try:
        user, key = await new_user(money, allowance=0 if with_key_budget else 100 * 54,
                                   budget=10**9 if with_key_budget else 0)
        if with_key_budget:
            async with money() as session:
                await grant(session, user, 100 * 54, key_id=key)
        results = await asyncio.gather(*[hold(money, sky(user, key, 50)) for _ in range(200)])
        held = [r for r in results if isinstance(r, Held)]
        assert len(held) + sum(isinstance(r, Shortfall) for r in results) == 200
        assert sum(h.tokens for h in held) <= 100 * 54 and len(held) >= 100
        for h in held:  # settle at random-ish usage, some past the hold
            async with money() as session:
                await end_hold(session, h.hold_id, used=h.tokens - (h.tokens % 7), counting=Counting.reported,
                               status=UsageStatus.completed, now=NOV)
        async with money() as session:
            now = await standing(session, user, key, now=NOV)
        spent = sum(h.tokens - (h.tokens % 7) for h in held)
        if with_key_budget:
            assert now.key_budget == 100 * 54 - spent and now.key_budget >= 0
        else:
            assert now.allowance_used == spent <= 100 * 54
    finally:
        await engine.dispose()
