"""The Spend tab's numbers and the warn amounts' mail (spec: "Watch the spend"), and the Models tab's
Floor and Next 7 days (spec: "Keep a model Warm").

The warn mail runs in the spend sampler with a clock the test moves: the count that the pause counts
crosses a warn amount, and one mail goes to the team through the outbox, once per crossing."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import delete
from sqlmodel import col, select

from deployments.operations import SpendSampler, prices_of
from ledger.accounts.tables import MailOutbox
from ledger.accounts.team_mail import TeamMail
from ledger.store.coltypes import utcnow
from ledger.tokens import spend
from ledger.tokens.spend import Sample, record_samples
from ledger.tokens.spend_warnings import SpendWarning
from tests.operations_fakes import Clock, FakeReplicas, sessions  # noqa: F401 - sessions: the fixture
from tests.unit.test_admin_routes import (  # noqa: F401 - admin, admin_pg_url: the fixtures
    Admin, admin, admin_pg_url, pytest_generate_tests, priced)
from tests.unit.test_spend import GPU, MINUTE_405B, START

TEAM = TeamMail("spend-team@example.org", "https://infra.example.org")


@pytest.fixture
async def warn_sessions(sessions: Any) -> Any:  # noqa: F811 - the operations' fixture, extended
    """The operations' tables empty, and no warnings or team mail of an earlier test."""
    await _forget(sessions)
    yield sessions
    await _forget(sessions)


async def _forget(sessions: Any) -> None:
    async with sessions() as session:
        await session.exec(delete(SpendWarning))
        await session.exec(delete(MailOutbox).where(col(MailOutbox.to_address) == TEAM.to))
        await session.commit()


async def team_mail(sessions: Any) -> list[tuple[str, str]]:
    async with sessions() as session:
        rows = (await session.exec(select(MailOutbox).where(col(MailOutbox.to_address) == TEAM.to)
                                   .order_by(col(MailOutbox.created_at)))).all()
        return [(row.subject, row.body) for row in rows]


def warning_sampler(sessions: Any, replicas: FakeReplicas, team: TeamMail | None = TEAM,
                    warn: tuple[float, ...] = (1.0, 2.0), pause: float = 3.0) -> SpendSampler:
    return SpendSampler(sessions, prices_of(GPU), replicas, pause_usd=pause, sample_s=60.0, warn_usd=warn, team=team)


# -- the warn amounts' mail ------------------------------------------------------------------------------

async def test_each_warn_amount_mails_the_team_once_as_the_spend_crosses_it(warn_sessions: Any) -> None:
    sessions = warn_sessions
    counter = warning_sampler(sessions, FakeReplicas({"llama-405b": 1}))  # $0.61 a minute
    clock = Clock(START)
    await counter.tick(clock())
    assert await team_mail(sessions) == []  # $0.61: below $1.00
    await counter.tick(clock.advance(minutes=1))  # $1.21: past $1.00
    mails = await team_mail(sessions)
    assert [subject for subject, _ in mails] == ["GPU spend passed $1.00 in 24 hours"]
    body = mails[0][1]
    assert f"The GPUs cost ${2 * MINUTE_405B:,.2f} since the last Clear within 24 hours" in body
    assert "past the warn amount of $1.00. New GPU work pauses at $3.00." in body
    assert "https://infra.example.org/admin?tab=analytics&view=spend" in body
    await counter.tick(clock.advance(minutes=1))  # $1.82: still past $1.00, and no second mail
    assert len(await team_mail(sessions)) == 1
    await counter.tick(clock.advance(minutes=1))  # $2.42: past $2.00
    assert [subject for subject, _ in await team_mail(sessions)] == [
        "GPU spend passed $1.00 in 24 hours", "GPU spend passed $2.00 in 24 hours"]
    await counter.tick(clock.advance(minutes=1))  # $3.03: the pause, and no more warnings
    assert (await _stop(sessions)).locked
    assert len(await team_mail(sessions)) == 2


async def test_a_warn_amount_mails_again_after_the_spend_fell_below_it(warn_sessions: Any) -> None:
    sessions = warn_sessions
    replicas = FakeReplicas({"llama-405b": 1})
    counter = warning_sampler(sessions, replicas, warn=(1.0,), pause=100.0)
    clock = Clock(START)
    for _ in range(2):
        await counter.tick(clock.advance(minutes=1))
    assert len(await team_mail(sessions)) == 1
    replicas.counts = {}
    await counter.tick(clock.advance(hours=25))  # the spend aged out of the 24 hours: below $1.00 again
    async with sessions() as session:
        assert (await session.exec(select(SpendWarning))).all() == []
    replicas.counts = {"llama-405b": 1}
    for _ in range(2):
        await counter.tick(clock.advance(minutes=1))
    assert len(await team_mail(sessions)) == 2  # a second crossing, a second mail


async def test_a_clear_starts_the_count_afresh_and_the_next_crossing_mails(warn_sessions: Any) -> None:
    sessions = warn_sessions
    counter = warning_sampler(sessions, FakeReplicas({"llama-405b": 1}), warn=(1.0,), pause=100.0)
    clock = Clock(START)
    for _ in range(2):
        await counter.tick(clock.advance(minutes=1))
    async with sessions() as session:
        await spend.clear(session, "root", clock.advance(seconds=1))
    await counter.tick(clock.advance(seconds=59))  # $0.61 since the Clear: the warning is forgotten
    assert len(await team_mail(sessions)) == 1
    await counter.tick(clock.advance(minutes=1))
    assert len(await team_mail(sessions)) == 2


async def test_without_a_team_address_nothing_is_mailed(warn_sessions: Any) -> None:
    sessions = warn_sessions
    counter = warning_sampler(sessions, FakeReplicas({"llama-405b": 1}), team=None)
    clock = Clock(START)
    for _ in range(3):
        await counter.tick(clock.advance(minutes=1))
    async with sessions() as session:
        assert [row.amount_cents for row in (await session.exec(select(SpendWarning))).all()] == [100]
        assert (await session.exec(select(MailOutbox).where(col(MailOutbox.subject).like("GPU spend%")))).all() == []


async def _stop(sessions: Any) -> Any:
    async with sessions() as session:
        return await spend.spend_stop(session)


# -- the tab's document ----------------------------------------------------------------------------------

@pytest.mark.postgres
@pytest.mark.settings(spend_pause_usd=3000.0, spend_warn_usd=[2000.0, 1000.0])
async def test_the_spend_tab_counts_each_day_and_who_used_each_model(admin: Admin) -> None:
    now = utcnow()
    today = now.date()
    alice, bob = await admin.user("alice"), await admin.user("bob")
    async with admin.stack.services.ledger.write_sessions() as session:
        await record_samples(session, [Sample("tiny-llama", 1, 1, 3.0, 3600), Sample("wide-llama", 1, 1, 1.0, 3600)],
                             now - timedelta(hours=1))
        await record_samples(session, [Sample("tiny-llama", 1, 1, 2.0, 3600)], now - timedelta(days=1, hours=1))
    await admin.spent(alice, None, 300, now - timedelta(hours=2))
    await admin.spent(alice, None, 100, now - timedelta(hours=3))
    await admin.spent(bob, None, 100, now - timedelta(hours=4))
    await admin.spent(bob, None, 999, now - timedelta(hours=49))  # before the 48 hours
    yesterday = today - timedelta(days=1)
    page = await admin.ok("GET", f"/v1/admin/spend?from={yesterday}&to={today}")
    assert (page["warn_usd"], page["pause_usd"], page["last_24h_usd"]) == ([1000.0, 2000.0], 3000.0, 4.0)
    per_day = page["per_day"]
    assert (per_day["from"], per_day["to"], per_day["models"]) == (str(yesterday), str(today),
                                                                   ["tiny-llama", "wide-llama"])
    days = {each["day"]: each["usd"] for each in per_day["days"]}
    assert days[str(today)] == {"tiny-llama": 3.0, "wide-llama": 1.0}
    if (now - timedelta(days=1, hours=1)).date() == yesterday:
        assert days[str(yesterday)] == {"tiny-llama": 2.0, "wide-llama": 0.0}
    # tiny-llama's $5.00 of the 48 hours, shared by the tokens: alice 400 of 500, bob 100.
    assert [(line["model"], line["name"], line["completions"], line["tokens"], line["usd"])
            for line in page["who_used"]] == [("tiny-llama", "alice", 2, 400, 4.0), ("tiny-llama", "bob", 1, 100, 1.0)]
    assert_refused = await admin.call("GET", "/v1/admin/spend?days=3")
    assert assert_refused.status_code == 400


async def test_the_models_tab_has_each_models_floor_and_next_7_days(admin: Admin) -> None:
    priced(admin.stack, "tiny-llama", gpus=1, hour_usd=2.0)
    models = admin.stack.services.catalog.models
    spec = models["tiny-llama"]  # scales to zero, as a GPU model does
    models["tiny-llama"] = spec.model_copy(update={"autoscaling": spec.autoscaling.model_copy(update={"min_replicas": 0})})
    empty = await admin.ok("GET", "/v1/admin/warm-windows")
    tiny = next(line for line in empty["models"] if line["model"] == "tiny-llama")
    assert tiny == {"model": "tiny-llama", "floor": 0, "warm_now": False, "replica_hour_usd": 2.0,
                    "next_7_days_usd": 0.0}
    await admin.ok("POST", "/v1/admin/warm-windows/now", {"model": "tiny-llama", "hours": 3})
    await admin.ok("POST", "/v1/admin/warm-windows", {"model": "tiny-llama", "days": [1, 2, 3, 4, 5, 6, 7],
                                                       "from": "09:00", "to": "10:00"})
    listed = await admin.ok("GET", "/v1/admin/warm-windows?model=tiny-llama")
    assert [line["model"] for line in listed["models"]] == ["tiny-llama"]
    tiny = listed["models"][0]
    assert (tiny["floor"], tiny["warm_now"]) == (1, True)  # Warm now keeps one replica
    assert tiny["next_7_days_usd"] == pytest.approx(3 * 2.0 + 7 * 2.0, abs=0.02)  # 3 hours now, 7 a week
    await admin.ok("POST", "/v1/admin/spend/lock", {})
    stopped = (await admin.ok("GET", "/v1/admin/warm-windows?model=tiny-llama"))["models"][0]
    assert (stopped["floor"], stopped["warm_now"]) == (0, False)  # no window keeps a model Warm while paused
