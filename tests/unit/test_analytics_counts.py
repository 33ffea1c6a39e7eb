"""The counts that the Admin page's Analytics tabs gained for issue 37 (spec: "Read the platform's
analytics"): the Daily numbers of Users, Budget and Platform, the Applications that wait, the Users
of each hour in five time zones, and All Users' choices. The team's accounts (admins) count in none
of the numbers about Users.

Every time is the test's own: Users join, Completions start and requests are refused at set
moments, and the tabs read them with a fixed clock, on SQLite and PostgreSQL."""
from __future__ import annotations

import uuid
from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest

from domain.operations import analytics_tabs
from domain.operations.platform import Platform
from ledger.accounts.feedback import FeedbackKind, FeedbackNote
from ledger.accounts.keys import create_user
from ledger.accounts.tables import Application, ApplicationStatus, Role
from ledger.tokens import analytics
from ledger.tokens.holds import Held, HoldAsk, end_hold, take_hold
from ledger.tokens.tables import BudgetRefusal, Counting, UsageStatus
from tests.ledger_fixtures import db_url, pg_url, sessions  # noqa: F401

NOW = datetime(2026, 1, 20, 12, 0, tzinfo=timezone.utc)  # the clock of every tab here
FIRST, LAST = date(2026, 1, 5), date(2026, 1, 7)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


async def person(sessions: Any, name: str, joined: datetime, admin: bool = False) -> uuid.UUID:
    async with sessions() as session:
        user = await create_user(session, name)
        user.created_at = joined
        if admin:
            user.role = Role.admin
        session.add(user)
        await session.commit()
        return user.id


async def completion(sessions: Any, user_id: uuid.UUID, started: datetime, used: int = 10,
                     status: UsageStatus = UsageStatus.completed) -> None:
    ask = HoldAsk(user_id=user_id, key_id=None, model="tiny-llama", prompt_tokens=0, choices=1, max_tokens=used,
                  may_lower=False)
    async with sessions() as session:
        held = await take_hold(session, ask, now=started)
    assert isinstance(held, Held)
    async with sessions() as session:
        await end_hold(session, held.hold_id, used=used, counting=Counting.reported, status=status,
                       now=started + timedelta(seconds=1))


async def tab(sessions: Any, name: str, first: date = FIRST, last: date = LAST, **narrowed: Any) -> dict[str, Any]:
    async with sessions() as session:
        return await analytics_tabs.tab(session, Platform(clock=lambda: NOW), name, first, last, **narrowed)


async def test_the_users_daily_numbers_count_each_day_and_leave_admins_out(sessions):
    ann = await person(sessions, "ann", at("2026-01-05T09:00"))
    ben = await person(sessions, "ben", at("2026-01-05T22:00"))
    await person(sessions, "cat", at("2026-01-07T08:00"))
    root = await person(sessions, "root", at("2026-01-05T10:00"), admin=True)
    await person(sessions, "dan", at("2026-01-08T00:00"))  # the day after the last
    await completion(sessions, ann, at("2026-01-05T20:00"))  # within 24 hours of joining
    await completion(sessions, ann, at("2026-01-06T10:00"))
    await completion(sessions, ben, at("2026-01-07T23:00"))  # 25 hours after: not within 24
    await completion(sessions, root, at("2026-01-05T11:00"))
    await completion(sessions, root, at("2026-01-06T11:00"))
    found = await tab(sessions, "users")
    assert (found["new_users"], found["new_users_active_within_24h"]) == (3, 1)
    assert found["daily"] == [
        {"day": "2026-01-05", "new_users": 2, "new_users_active_within_24h": 1, "active_users": 1, "feedback": 0},
        {"day": "2026-01-06", "new_users": 0, "new_users_active_within_24h": 0, "active_users": 1, "feedback": 0},
        {"day": "2026-01-07", "new_users": 1, "new_users_active_within_24h": 0, "active_users": 1, "feedback": 0}]
    assert found["users"] == 4  # ann, ben, cat and dan; root is the team's


async def test_the_users_daily_numbers_count_the_feedback_of_each_day_but_the_teams(sessions):
    ann = await person(sessions, "ann", at("2026-01-01T00:00"))
    root = await person(sessions, "root", at("2026-01-01T00:00"), admin=True)
    async with sessions() as session:
        for who, moment in ((ann, "2026-01-05T08:00"), (None, "2026-01-05T09:00"), (root, "2026-01-05T10:00"),
                            (ann, "2026-01-07T23:59"), (ann, "2026-01-08T00:00")):
            session.add(FeedbackNote(user_id=who, created_at=at(moment), kind=FeedbackKind.bug, note="x"))
        await session.commit()
    daily = (await tab(sessions, "users"))["daily"]
    assert [(d["day"], d["feedback"]) for d in daily] == [("2026-01-05", 2), ("2026-01-06", 0), ("2026-01-07", 1)]


async def test_the_users_tab_counts_the_applications_that_wait(sessions):
    async with sessions() as session:
        for n, status in enumerate((ApplicationStatus.waiting, ApplicationStatus.waiting, ApplicationStatus.approved)):
            session.add(Application(email=f"a{n}@example.org", name=f"A {n}", organization="Lab", planned_usage="x",
                                    status=status))
        await session.commit()
    assert (await tab(sessions, "users"))["applications_waiting"] == 2


async def test_the_budget_tab_counts_the_refused_requests_of_the_days_and_of_each_day(sessions):
    ann = await person(sessions, "ann", at("2026-01-01T00:00"))
    async with sessions() as session:
        for moment in ("2026-01-04T23:59", "2026-01-05T00:00", "2026-01-05T13:00", "2026-01-07T23:59",
                       "2026-01-08T00:00"):
            session.add(BudgetRefusal(at=at(moment), user_id=ann, model="tiny-llama", source="api", tokens=5))
        await session.commit()
    found = await tab(sessions, "budget")
    assert found["refused_requests"] == 3
    assert found["daily"] == [{"day": "2026-01-05", "refused_requests": 2},
                              {"day": "2026-01-06", "refused_requests": 0},
                              {"day": "2026-01-07", "refused_requests": 1}]


async def test_the_platform_daily_numbers_list_every_day_with_its_requests(sessions):
    ann = await person(sessions, "ann", at("2026-01-01T00:00"))
    await completion(sessions, ann, at("2026-01-05T10:00"))
    await completion(sessions, ann, at("2026-01-05T11:00"), status=UsageStatus.failed)
    await completion(sessions, ann, at("2026-01-07T11:00"), status=UsageStatus.stopped)
    daily = (await tab(sessions, "platform"))["daily"]
    assert [(d["day"], d["requests"], d["completed"], d["failed"], d["stopped"], d["gpu_usd"]) for d in daily] == [
        ("2026-01-05", 2, 1, 1, 0, 0.0), ("2026-01-06", 0, 0, 0, 0, 0.0), ("2026-01-07", 1, 0, 0, 1, 0.0)]


async def test_the_users_of_each_hour_are_counted_in_five_time_zones_without_admins(sessions):
    ann = await person(sessions, "ann", at("2026-01-01T00:00"))
    ben = await person(sessions, "ben", at("2026-01-01T00:00"))
    root = await person(sessions, "root", at("2026-01-01T00:00"), admin=True)
    await completion(sessions, ann, at("2026-01-05T23:10"))
    await completion(sessions, ann, at("2026-01-06T23:50"))  # the same hour again: ann counts once
    await completion(sessions, ben, at("2026-01-06T23:30"))
    await completion(sessions, root, at("2026-01-06T23:40"))
    await completion(sessions, ben, at("2026-01-07T05:00"))
    hours = {row["time_zone"]: row["users"] for row in (await tab(sessions, "platform"))["users_by_hour"]}
    assert list(hours) == list(analytics.ZONES)
    # 23:00 UTC in January is 15:00 in Los Angeles, 18:00 in New York, 00:00 in Berlin, 08:00 in Tokyo.
    for zone, hour in (("UTC", 23), ("America/Los_Angeles", 15), ("America/New_York", 18), ("Europe/Berlin", 0),
                       ("Asia/Tokyo", 8)):
        assert hours[zone][hour] == 2, zone
        assert sum(hours[zone]) == 3, zone  # and ben at 05:00 UTC, one hour else


async def test_all_users_lists_each_user_with_a_completion_in_the_days_whoever_is_chosen(sessions):
    ann = await person(sessions, "ann", at("2026-01-01T00:00"))
    ben = await person(sessions, "ben", at("2026-01-01T00:00"))
    await person(sessions, "cat", at("2026-01-01T00:00"))
    await completion(sessions, ben, at("2026-01-06T10:00"))
    await completion(sessions, ann, at("2026-01-05T10:00"))
    await completion(sessions, ann, at("2026-01-07T10:00"))
    await completion(sessions, ann, at("2026-01-09T10:00"))  # after the days
    found = await tab(sessions, "usage", user_id=ben)
    assert found["users"] == [{"id": str(ann), "name": "ann"}, {"id": str(ben), "name": "ben"}]
    assert [share["name"] for share in found["by_user"]] == ["ben"]


async def test_a_slow_pace_runs_out_after_this_month_even_beyond_any_calendar(sessions):
    # 1 token of 5,000,000 in 19.5 days: at that pace the allowance lasts some 260,000 years.
    ann = await person(sessions, "ann", at("2026-01-01T00:00"))
    await completion(sessions, ann, at("2026-01-02T00:00"), used=1)
    closest = (await tab(sessions, "budget"))["closest"]
    assert [(line["user"]["name"], line["allowance_used"], line["runs_out_on"]) for line in closest] == [("ann", 1, None)]
