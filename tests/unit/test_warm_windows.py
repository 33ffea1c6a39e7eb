"""Warm windows with a clock the tests move: weekly windows (across midnight, the
week's end, and changes of daylight saving time), Warm now, what they cost, the
spend stop that turns them all off, and the floor keeper's one open keep_warm
call per Warm model, on the ledger of the fake stack."""
from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from deployments.catalog import load_catalog
from deployments.operations import FloorKeeper, build_operations
from ledger.tokens import spend
from ledger.tokens import warm
from ledger.errors import LedgerError, UnknownModel, WarmWindowRefused
from ledger.tokens.tables import WarmWindow
from tests.operations_fakes import Clock, FakeModelHandle, FakeReplicas, sessions, wait_until  # noqa: F401 - sessions: the fixture

UTC = timezone.utc
SERVED = ("llama-8b", "llama-405b", "trinity-truebase")
GPU = load_catalog("gpu")
MONDAY = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday, in a week without a change of the clock
MON, TUE, WED, THU, FRI, SAT, SUN = range(1, 8)


def at(day: datetime, hour: int, minute: int = 0) -> datetime:
    return day.replace(hour=hour, minute=minute)


def weekly(days: list[int], start: str, end: str, time_zone: str = "UTC") -> WarmWindow:
    """A window as add_window keeps it, without the database: for the rules of time alone."""
    return WarmWindow(model_id="llama-8b", days=",".join(map(str, days)), start_minute=_minute(start),
                      end_minute=_minute(end), time_zone=time_zone, created_at=MONDAY)


def _minute(clock: str) -> int:
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)


async def add(sessions: Any, days: list[int], start: str, end: str, time_zone: str = "UTC",
              model_id: str = "llama-8b") -> WarmWindow:
    async with sessions() as session:
        return await warm.add_window(session, model_id, days, _minute(start), _minute(end), time_zone, "ada",
                                     MONDAY, served=SERVED)


async def warm_models(sessions: Any, now: datetime) -> set[str]:
    async with sessions() as session:
        return await warm.warm_models(session, now)


# -- on and off with the clock ----------------------------------------------------------------------------

async def test_a_window_opens_at_its_from_and_closes_at_its_to(sessions: Any) -> None:
    window = await add(sessions, [MON, WED], "09:00", "17:30")
    assert (window.days, window.start_minute, window.end_minute, window.time_zone) == ("1,3", 540, 1050, "UTC")
    assert (window.created_by, window.starts_at, window.ends_at) == ("ada", None, None)
    clock = Clock(at(MONDAY, 8, 59))
    assert await warm_models(sessions, clock()) == set()
    assert await warm_models(sessions, clock.advance(minutes=1)) == {"llama-8b"}  # 09:00
    assert await warm_models(sessions, clock.advance(hours=8, minutes=29)) == {"llama-8b"}  # 17:29
    assert await warm_models(sessions, clock.advance(minutes=1)) == set()  # 17:30
    assert await warm_models(sessions, at(MONDAY + timedelta(days=1), 12)) == set()  # a Tuesday
    assert await warm_models(sessions, at(MONDAY + timedelta(days=2), 12)) == {"llama-8b"}  # a Wednesday
    assert await warm_models(sessions, at(MONDAY + timedelta(days=7), 9)) == {"llama-8b"}  # next week


def test_a_window_that_ends_at_or_before_its_start_ends_the_next_day() -> None:
    friday = MONDAY + timedelta(days=4)
    late = weekly([FRI], "22:00", "02:00")
    assert not warm.is_on(late, at(friday, 21, 59))
    assert warm.is_on(late, at(friday, 22))
    assert warm.is_on(late, at(friday + timedelta(days=1), 1, 59))  # Saturday, from Friday's window
    assert not warm.is_on(late, at(friday + timedelta(days=1), 2))
    assert not warm.is_on(late, at(friday + timedelta(days=1), 23))  # Saturday is not one of its days
    # Sunday's window runs into Monday, across the end of the week.
    sunday = weekly([SUN], "23:00", "01:00")
    assert warm.is_on(sunday, at(MONDAY + timedelta(days=7), 0, 30))
    assert not warm.is_on(sunday, at(MONDAY, 23, 30))
    # From equal to To: a whole day, to the same minute of the next.
    whole = weekly([TUE], "06:00", "06:00")
    tuesday = MONDAY + timedelta(days=1)
    assert not warm.is_on(whole, at(tuesday, 5, 59))
    assert warm.is_on(whole, at(tuesday, 6)) and warm.is_on(whole, at(tuesday + timedelta(days=1), 5, 59))
    assert not warm.is_on(whole, at(tuesday + timedelta(days=1), 6))


def test_a_window_keeps_its_wall_clock_hours_across_a_change_of_daylight_saving_time() -> None:
    # Berlin skips 02:00-03:00 on Sunday 29 March 2026: that Sunday's 01:00-05:00 lasts 3 hours.
    berlin = weekly([SUN], "01:00", "05:00", "Europe/Berlin")
    before, change = datetime(2026, 3, 22, tzinfo=UTC), datetime(2026, 3, 29, tzinfo=UTC)
    assert warm.is_on(berlin, at(before, 0)) and warm.is_on(berlin, at(before, 3, 59))  # CET: UTC+1
    assert not warm.is_on(berlin, at(before, 4))
    assert not warm.is_on(berlin, at(change - timedelta(days=1), 23, 59))
    assert warm.is_on(berlin, at(change, 0)) and warm.is_on(berlin, at(change, 2, 59))  # to 05:00 CEST
    assert not warm.is_on(berlin, at(change, 3))
    assert warm.hours_between(berlin, before, before + timedelta(days=1)) == 4
    assert warm.hours_between(berlin, change, change + timedelta(days=1)) == 3
    assert warm.hours_per_week(berlin) == 4  # the week without a change


def test_a_window_across_midnight_and_the_autumn_change_of_the_clock() -> None:
    # New York's clocks go back at 02:00 on Sunday 1 November 2026: Saturday's 22:00-06:00 lasts 9 hours.
    night = weekly([SAT], "22:00", "06:00", "America/New_York")
    sunday = datetime(2026, 11, 1, tzinfo=UTC)
    assert not warm.is_on(night, at(sunday, 1, 59))  # 21:59 EDT on Saturday
    assert warm.is_on(night, at(sunday, 2))  # 22:00 EDT
    assert warm.is_on(night, at(sunday, 10, 59))  # 05:59 EST
    assert not warm.is_on(night, at(sunday, 11))  # 06:00 EST
    assert warm.hours_between(night, sunday - timedelta(days=1), sunday + timedelta(days=1)) == 9
    week_before = sunday - timedelta(days=7)
    assert not warm.is_on(night, at(week_before, 10))  # 06:00 EDT: 8 hours that week


async def test_a_window_in_its_time_zone_through_the_ledger(sessions: Any) -> None:
    await add(sessions, [MON], "09:00", "10:00", "Asia/Tokyo", model_id="llama-405b")
    assert await warm_models(sessions, at(MONDAY, 0)) == {"llama-405b"}  # 09:00 in Tokyo, UTC+9
    assert await warm_models(sessions, at(MONDAY, 1)) == set()


async def test_warm_now_is_on_at_once_and_ends_by_itself(sessions: Any) -> None:
    clock = Clock(at(MONDAY, 13, 17))
    async with sessions() as session:
        now = await warm.warm_now(session, "trinity-truebase", 2, "ada", clock(), served=SERVED)
    assert (now.starts_at, now.ends_at, now.days, now.created_by) == (clock(), clock() + timedelta(hours=2), "", "ada")
    assert await warm_models(sessions, clock()) == {"trinity-truebase"}
    assert await warm_models(sessions, clock.advance(hours=1, minutes=59)) == {"trinity-truebase"}
    async with sessions() as session:
        assert [w.id for w in await warm.windows(session, now=clock())] == [now.id]
    assert await warm_models(sessions, clock.advance(minutes=1)) == set()
    async with sessions() as session:
        assert await warm.windows(session, now=clock()) == []  # it ended: not listed any more
    assert await warm_models(sessions, at(MONDAY + timedelta(days=7), 13, 30)) == set()  # and it never repeats


async def test_windows_listed_by_model_and_removed(sessions: Any) -> None:
    first = await add(sessions, [MON], "09:00", "10:00")
    second = await add(sessions, [TUE], "09:00", "10:00", model_id="llama-405b")
    async with sessions() as session:
        assert [w.id for w in await warm.windows(session, now=MONDAY)] == [first.id, second.id]
        assert [w.id for w in await warm.windows(session, "llama-405b", now=MONDAY)] == [second.id]
        assert await warm.remove_window(session, first.id) is True
        assert await warm.remove_window(session, first.id) is False
        assert await warm.remove_window(session, uuid.uuid4()) is False
        assert [w.id for w in await warm.windows(session, now=MONDAY)] == [second.id]
    assert await warm_models(sessions, at(MONDAY, 9, 30)) == set()


# -- what windows cost ---------------------------------------------------------------------------------------

def test_the_catalog_prices_a_warm_hour_as_the_spec_does() -> None:
    assert GPU.models["llama-8b"].replica_hour_usd == pytest.approx(1.95)
    assert GPU.models["llama-405b"].replica_hour_usd == pytest.approx(36.32)
    assert GPU.models["trinity-truebase"].replica_hour_usd == pytest.approx(36.32)
    assert GPU.models["llama-405b"].gpus_per_replica == 8
    assert load_catalog("embedded").models["smollm2-135m"].replica_hour_usd == 0


def test_hours_per_week_and_cost_per_week() -> None:
    workdays = weekly([MON, TUE, WED, THU, FRI], "09:00", "17:00")
    assert warm.hours_per_week(workdays) == 40
    assert warm.cost_per_week(workdays, GPU.models["llama-8b"].replica_hour_usd) == pytest.approx(78.0)
    assert warm.cost_per_week(workdays, GPU.models["llama-405b"].replica_hour_usd) == pytest.approx(1452.8)
    assert warm.hours_per_week(weekly([FRI, SAT], "22:00", "02:00")) == 8
    assert warm.hours_per_week(weekly([SUN], "06:00", "06:00")) == 24
    assert warm.hours_per_week(weekly(list(range(1, 8)), "00:00", "00:00")) == 168
    assert warm.hours_per_week(weekly([MON], "09:15", "09:45")) == 0.5
    # The Next 7 days of a window that is on now count from now.
    assert warm.hours_between(workdays, at(MONDAY, 13), at(MONDAY, 13) + timedelta(days=7)) == 40


async def test_warm_now_costs_its_hours(sessions: Any) -> None:
    async with sessions() as session:
        now = await warm.warm_now(session, "llama-405b", 3, "ada", MONDAY, served=SERVED)
    assert warm.hours_per_week(now) == 3
    assert warm.cost_per_week(now, GPU.models["llama-405b"].replica_hour_usd) == pytest.approx(108.96)
    assert warm.hours_between(now, MONDAY + timedelta(hours=2), MONDAY + timedelta(days=7)) == 1


# -- refusals ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("days, start, end, zone, field, message", [
    ([], 540, 600, "UTC", "days", "A window's days are ISO weekdays from 1 (Monday) to 7 (Sunday), at least one; "
                                  "got []."),
    ([0, 1], 540, 600, "UTC", "days", None),
    ([8], 540, 600, "UTC", "days", None),
    ([True], 540, 600, "UTC", "days", None),
    ([1], -1, 600, "UTC", "start_minute", "A window's start_minute is a minute of the day from 0 to 1439 "
                                          "(00:00 to 23:59), not -1."),
    ([1], 540, 1440, "UTC", "end_minute", None),
    ([1], 9.5, 600, "UTC", "start_minute", None),
    ([1], 540, 600, "Mars/Olympus_Mons", "time_zone", "The time zone 'Mars/Olympus_Mons' is not one of the IANA "
                                                      "time zones, such as UTC or Europe/Berlin."),
    ([1], 540, 600, "", "time_zone", None),
    ([1], 540, 600, "../etc/passwd", "time_zone", None),
])
async def test_a_window_that_cannot_be_kept_is_refused(sessions: Any, days: list, start: Any, end: Any, zone: str,
                                                       field: str, message: str | None) -> None:
    async with sessions() as session:
        with pytest.raises(WarmWindowRefused) as refused:
            await warm.add_window(session, "llama-8b", days, start, end, zone, "ada", MONDAY, served=SERVED)
    assert refused.value.field == field
    assert isinstance(refused.value, LedgerError)
    if message is not None:
        assert refused.value.message == str(refused.value) == message
    async with sessions() as session:
        assert await warm.windows(session, now=MONDAY) == []


@pytest.mark.parametrize("hours", [0, 25, -1, 1.5, "2", True, None])
async def test_warm_now_takes_1_to_24_whole_hours(sessions: Any, hours: Any) -> None:
    async with sessions() as session:
        with pytest.raises(WarmWindowRefused) as refused:
            await warm.warm_now(session, "llama-8b", hours, "ada", MONDAY, served=SERVED)
    assert refused.value.field == "hours"
    assert refused.value.message == f"Warm now lasts a whole number of hours from 1 to 24, not {hours!r}."


async def test_a_window_of_a_model_not_served_is_refused(sessions: Any) -> None:
    async with sessions() as session:
        with pytest.raises(UnknownModel) as unknown:
            await warm.add_window(session, "gpt-4", [MON], 540, 600, "UTC", "ada", MONDAY, served=SERVED)
        assert unknown.value.message == ("The model `gpt-4` does not exist. The platform serves llama-405b, "
                                         "llama-8b, trinity-truebase.")
        with pytest.raises(UnknownModel):
            await warm.warm_now(session, "gpt-4", 1, "ada", MONDAY, served=SERVED)


async def test_the_extremes_of_a_day_are_kept(sessions: Any) -> None:
    window = await add(sessions, [SUN, MON, SUN], "00:00", "23:59")
    assert (window.days, window.start_minute, window.end_minute) == ("1,7", 0, 1439)


# -- the spend stop turns every window off ---------------------------------------------------------------------

async def test_while_the_spend_stop_is_on_no_window_keeps_a_model_warm(sessions: Any) -> None:
    await add(sessions, [MON], "00:00", "00:00")
    async with sessions() as session:
        await warm.warm_now(session, "llama-405b", 24, "ada", MONDAY, served=SERVED)
    noon = at(MONDAY, 12)
    assert await warm_models(sessions, noon) == {"llama-8b", "llama-405b"}
    async with sessions() as session:
        await spend.lock(session, "ada", "month end", noon)
    assert await warm_models(sessions, noon) == set()
    async with sessions() as session:
        assert len(await warm.windows(session, now=noon)) == 2  # the windows stay; they keep nothing
        await spend.pause_at(session, 3000.0, noon)  # the stop is on already: no change
    async with sessions() as session:
        await spend.clear(session, "ada", noon)
    assert await warm_models(sessions, noon) == {"llama-8b", "llama-405b"}
    async with sessions() as session:
        await spend.pause_at(session, 3000.0, noon)
    assert await warm_models(sessions, noon) == set()  # a pause at the stop amount too


# -- the floor keeper -------------------------------------------------------------------------------------------

async def test_the_floor_keeper_keeps_exactly_one_call_open_while_a_window_is_on(sessions: Any) -> None:
    await add(sessions, [MON], "09:00", "10:00")
    handles = {model_id: FakeModelHandle() for model_id in SERVED}
    keeper = FloorKeeper(sessions, handles, keep_warm_s=0.05)
    clock = Clock(at(MONDAY, 8, 59))
    try:
        await keeper.tick(clock())
        await asyncio.sleep(0.02)
        assert [h.calls for h in handles.values()] == [0, 0, 0]
        await keeper.tick(clock.advance(minutes=1))
        await wait_until(lambda: handles["llama-8b"].calls >= 3)  # each call ends by itself; the next follows
        for _ in range(3):
            await keeper.tick(clock.advance(minutes=10))
        assert handles["llama-8b"].open == handles["llama-8b"].most_open == 1
        assert set(keeper.kept) == {"llama-8b"}
        assert [handles[m].calls for m in ("llama-405b", "trinity-truebase")] == [0, 0]
        await keeper.tick(clock.advance(minutes=30))  # 10:00: the window ends
        assert handles["llama-8b"].open == 0 and handles["llama-8b"].cancelled == 1 and keeper.kept == {}
        calls = handles["llama-8b"].calls
        await keeper.tick(clock.advance(minutes=1))
        await asyncio.sleep(0.1)
        assert handles["llama-8b"].calls == calls and handles["llama-8b"].open == 0
    finally:
        await keeper.stop()


async def test_the_floor_is_released_while_the_spend_stop_is_on(sessions: Any) -> None:
    await add(sessions, [MON], "00:00", "00:00")
    handle = FakeModelHandle()
    keeper = FloorKeeper(sessions, {"llama-8b": handle}, keep_warm_s=60)
    noon = at(MONDAY, 12)
    try:
        await keeper.tick(noon)
        await wait_until(lambda: handle.open == 1)
        async with sessions() as session:
            await spend.lock(session, "ada", "", noon)
        await keeper.tick(noon)
        assert (handle.open, handle.cancelled, keeper.kept) == (0, 1, {})
        async with sessions() as session:
            await spend.clear(session, "ada", noon)
        await keeper.tick(noon)
        await wait_until(lambda: handle.open == 1)
        assert handle.calls == 2
    finally:
        await keeper.stop()
    assert handle.open == 0


async def test_a_keep_warm_call_that_fails_is_followed_by_another(sessions: Any) -> None:
    await add(sessions, [MON], "00:00", "00:00")
    handle = FakeModelHandle()
    real_remote, failures = handle.keep_warm.remote, []

    def remote(seconds: float) -> Any:
        if not failures:
            failures.append(seconds)

            async def gone() -> None:
                raise RuntimeError("the replica went away")
            response = real_remote(seconds)
            response._stay_open = gone  # its replica died before the call could open
            return response
        return real_remote(seconds)

    handle.keep_warm.remote = remote
    keeper = FloorKeeper(sessions, {"llama-8b": handle}, keep_warm_s=60, retry_s=0.01)
    try:
        await keeper.tick(at(MONDAY, 12))
        await wait_until(lambda: handle.open == 1)
        assert failures == [60] and handle.calls == 1
    finally:
        await keeper.stop()


async def test_the_operations_loop_opens_and_closes_the_floor_with_its_clock(sessions: Any) -> None:
    await add(sessions, [MON], "09:00", "10:00", model_id="llama-405b")
    handles = {model_id: FakeModelHandle() for model_id in SERVED}
    clock = Clock(at(MONDAY, 8, 30))
    operations = build_operations(sessions, GPU, handles, pause_usd=3000.0, sample_s=60.0,
                                  count_replicas=FakeReplicas(), clock=clock)
    operations.floor_check_s = 0.01
    operations.start()
    try:
        await asyncio.sleep(0.05)
        assert handles["llama-405b"].calls == 0
        clock.advance(minutes=45)
        await wait_until(lambda: handles["llama-405b"].open == 1)
        clock.advance(hours=1)
        await wait_until(lambda: handles["llama-405b"].open == 0)
        operations.check_alive()
    finally:
        await operations.stop()
    assert handles["llama-405b"].most_open == 1 and handles["llama-405b"].cancelled == 1
