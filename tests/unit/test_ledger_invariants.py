"""The ledger's invariants (ledger/audit, issue 38's chaos soak) on both ledgers.

Each invariant first holds on a ledger that the real operations made (Holds and their ends,
Grants, the Runner's queue: claims, attempts, lost leases, finishes; Loom Nodes; Playground
Runs), then breaks the way a bug would break it, and the audit names exactly that. Every
operation runs at the test's clock (T0 and after), never at the real one: the tests pass on any
day. The audit reads at LATER, when every lease taken at T0 has lapsed.
"""
from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import update
from sqlmodel import col, select

from cluster import invariants as command
from ledger.accounts.keys import set_key_status
from ledger.accounts.tables import KeyStatus
from ledger.audit import Invariant, Violation, find_violations
from ledger.store.db import make_engine, session_factory
from ledger.tokens.grants import grant, set_budget
from ledger.tokens.holds import Held, HoldAsk, end_hold, take_hold
from ledger.tokens.tables import Budget, Counting, Hold, HoldState, MonthlyUsage, UsageSource, UsageStatus
from ledger.work import loom_runs, looms, queue, runs
from ledger.work.harvests import enqueue as enqueue_harvest
from ledger.work.tables import (Harvest, LoomNode, NodeStatus, PlaygroundRun, RunStatus, Work, WorkKind,
                                WorkStatus)
from tests.ledger_fixtures import db_url, pg_url, run_in_thread  # noqa: F401
from tests.ledger_fixtures import user_with_tokens

T0 = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
LEASE = timedelta(seconds=30)
LATER = T0 + timedelta(hours=1)
KEPT = timedelta(days=1)
MODEL = "tiny-llama"
OWNER = "runner-a"
SOURCES = {WorkKind.job: UsageSource.job, WorkKind.harvest: UsageSource.harvest, WorkKind.node: UsageSource.loom,
           WorkKind.run: UsageSource.playground}


@pytest_asyncio.fixture
async def ledger(db_url: str) -> Any:  # noqa: F811
    """The ledger's sessions; SQLite's transactions take the write lock at BEGIN, as the API's do."""
    engine = make_engine(db_url)
    yield session_factory(engine.execution_options(sqlite_begin="IMMEDIATE"))
    await engine.dispose()


async def audit(ledger: Any, now: datetime = LATER) -> list[tuple[Invariant, str]]:
    return [(found.invariant, found.subject) for found in await find_violations(ledger, now=now)]


async def violations(ledger: Any, now: datetime = LATER) -> list[Violation]:
    return await find_violations(ledger, now=now)


async def hold(ledger: Any, user: uuid.UUID, key: uuid.UUID | None, tokens: int, *, request_id: str = "",
               source: UsageSource = UsageSource.api, now: datetime = T0) -> uuid.UUID:
    """A Hold of `tokens` (4 of them the prompt's), leased to OWNER."""
    ask = HoldAsk(user_id=user, key_id=key, model=MODEL, prompt_tokens=4, choices=1, max_tokens=tokens - 4,
                  may_lower=False, source=source, request_id=request_id, owner=OWNER, lease_s=LEASE.total_seconds())
    async with ledger() as session:
        held = await take_hold(session, ask, now=now)
    assert isinstance(held, Held), held
    return held.hold_id


async def settle(ledger: Any, hold_id: uuid.UUID, used: int | None, now: datetime = T0) -> None:
    async with ledger() as session:
        assert await end_hold(session, hold_id, used=used, counting=Counting.reported if used is not None else None,
                              status=UsageStatus.completed if used is not None else UsageStatus.failed, now=now)


async def change(ledger: Any, statement: Any) -> None:
    """A write no operation of the ledger makes: the bug under test."""
    async with ledger() as session:
        await session.execute(statement)
        await session.commit()


# -- background work through the Runner's queue --------------------------------------------------------


async def job(ledger: Any, user: uuid.UUID, key: uuid.UUID) -> uuid.UUID:
    work = Work(kind=WorkKind.job, user_id=user, key_id=key, model=MODEL, model_id=MODEL, request="{}",
                request_id="", created_at=T0)
    work.request_id = f"req_job_{work.id.hex}"
    async with ledger() as session:
        queued = await queue.enqueue_within(session, work, lambda _counts: True, T0)
    assert isinstance(queued, Work)
    return queued.id


async def harvest(ledger: Any, user: uuid.UUID, key: uuid.UUID) -> uuid.UUID:
    work = Work(kind=WorkKind.harvest, user_id=user, key_id=key, model=MODEL, model_id=MODEL, request="{}",
                request_id="", created_at=T0)
    work.request_id = f"req_harvest_{work.id.hex}"
    row = Harvest(work_id=work.id, model_class="small", n_prompts=2, reserved_tokens=40, layers="[0]")
    async with ledger() as session:
        assert not isinstance(await enqueue_harvest(session, work, row, T0), type(None))
    return work.id


async def attempt(ledger: Any, kind: WorkKind, work_id: uuid.UUID, tokens: int,
                  now: datetime = T0) -> tuple[int, uuid.UUID]:
    """The Runner claims the row and takes its attempt's Hold, as the handlers do: a harvest's Hold
    carries the row's request id, the others' the engine's `<request id>-<attempt>`."""
    async with ledger() as session:
        claimed = await queue.claim(session, kind, [MODEL], OWNER, LEASE.total_seconds(), now)
    assert [work.id for work in claimed] == [work_id]
    work = claimed[0]
    request_id = work.request_id if kind is WorkKind.harvest else f"{work.request_id}-{work.attempts}"
    hold_id = await hold(ledger, work.user_id, work.key_id, tokens, request_id=request_id, source=SOURCES[kind],
                         now=now)
    async with ledger() as session:
        assert await queue.attach_hold(session, work_id, OWNER, hold_id, work.attempts)
    return work.attempts, hold_id


async def finish(ledger: Any, work_id: uuid.UUID, attempt_number: int, used: int, now: datetime = T0,
                 also: Any = None) -> bool:
    result = queue.Result(WorkStatus.succeeded, 200, "{}", also=also)
    end = queue.HoldEnd(used, Counting.reported, UsageStatus.completed)
    async with ledger() as session:
        return await queue.finish(session, work_id, OWNER, result, end, now, KEPT, attempt_number)


async def crash(ledger: Any, work_id: uuid.UUID, now: datetime, failed: Any = None) -> queue.Recovered | None:
    """Another Runner finds the row's lease lapsed (its Runner died) and recovers it."""
    async with ledger() as session:
        return await queue.recover_lapsed(session, work_id, now, failed, KEPT)


async def status_of(ledger: Any, work_id: uuid.UUID) -> WorkStatus:
    async with ledger() as session:
        return (await session.exec(select(Work.status).where(Work.id == work_id))).one()


# -- Holds ----------------------------------------------------------------------------------------------


async def test_a_hold_left_held_is_found_until_it_ends(ledger: Any) -> None:
    user, key = await user_with_tokens(ledger, allowance=1000)
    hold_id = await hold(ledger, user, key, 10)
    found = await violations(ledger)
    assert [(v.invariant, v.subject) for v in found] == [(Invariant.hold_held, str(hold_id))]
    assert f"of '{OWNER}', lease until {T0 + LEASE}" in found[0].detail
    await settle(ledger, hold_id, 7)
    assert await audit(ledger) == []


async def test_an_ended_hold_without_its_end_is_found(ledger: Any) -> None:
    user, key = await user_with_tokens(ledger, allowance=1000)
    settled, released = await hold(ledger, user, key, 10), await hold(ledger, user, key, 10)
    await settle(ledger, settled, 7)
    await settle(ledger, released, None)
    assert await audit(ledger) == []
    await change(ledger, update(Hold).where(col(Hold.id) == settled).values(status=UsageStatus.running))
    assert await audit(ledger) == [(Invariant.hold_row, str(settled))]


async def test_an_api_request_settled_twice_is_found_by_its_request_id(ledger: Any) -> None:
    user, key = await user_with_tokens(ledger, allowance=1000)
    first = await hold(ledger, user, key, 10, request_id="cmpl-one")
    await settle(ledger, first, 6)
    await settle(ledger, await hold(ledger, user, key, 10, request_id="cmpl-two"), 6)
    assert await audit(ledger) == []
    # A retry of the same request that took and settled a second Hold: its counters add up, its request does not.
    await settle(ledger, await hold(ledger, user, key, 10, request_id="cmpl-one"), 5)
    found = await violations(ledger)
    assert [(v.invariant, v.subject, v.detail) for v in found] == [
        (Invariant.request_paid_twice, "cmpl-one", "2 settled Holds, 11 tokens in all")]


# -- background work ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [WorkKind.job, WorkKind.harvest])
async def test_a_request_cut_by_a_crash_runs_again_and_pays_once(ledger: Any, kind: WorkKind) -> None:
    user, key = await user_with_tokens(ledger, allowance=1000)
    work_id = await (job if kind is WorkKind.job else harvest)(ledger, user, key)
    first, first_hold = await attempt(ledger, kind, work_id, 40)
    assert await crash(ledger, work_id, T0 + 2 * LEASE) is queue.Recovered.requeued
    second, _ = await attempt(ledger, kind, work_id, 40, now=T0 + 3 * LEASE)
    assert await finish(ledger, work_id, second, 33, now=T0 + 3 * LEASE)
    assert (first, second) == (1, 2) and await status_of(ledger, work_id) is WorkStatus.succeeded
    assert await audit(ledger) == []
    # The bug: the cut attempt's Hold was settled, not released, and the request paid twice.
    await change(ledger, update(Hold).where(col(Hold.id) == first_hold).values(state=HoldState.settled, used=40))
    await change(ledger, update(MonthlyUsage).where(col(MonthlyUsage.user_id) == user).values(used=73))
    found = await violations(ledger)
    assert [(v.invariant, v.subject) for v in found] == [(Invariant.work_paid_twice, str(work_id))]
    assert f"{first_hold}: 40" in found[0].detail


async def test_a_job_that_succeeds_after_its_hold_was_released_is_unpaid(ledger: Any) -> None:
    user, key = await user_with_tokens(ledger, allowance=1000)
    work_id = await job(ledger, user, key)
    number, hold_id = await attempt(ledger, WorkKind.job, work_id, 20)
    # The bug: the Hold's lease lapsed while the row's did not, so another process released it,
    # and the answer then found nothing to settle.
    await settle(ledger, hold_id, None)
    assert await finish(ledger, work_id, number, 15)
    assert await audit(ledger) == [(Invariant.work_unpaid, str(work_id))]


async def test_a_row_running_past_its_lease_is_found_until_it_is_queued_again(ledger: Any) -> None:
    user, key = await user_with_tokens(ledger, allowance=1000)
    work_id = await job(ledger, user, key)
    _, hold_id = await attempt(ledger, WorkKind.job, work_id, 20)
    # While the lease lives, the row runs; only its Hold is still held.
    assert await audit(ledger, now=T0 + LEASE / 2) == [(Invariant.hold_held, str(hold_id))]
    found = await violations(ledger)
    assert [(v.invariant, v.subject) for v in found] == [(Invariant.hold_held, str(hold_id)),
                                                         (Invariant.work_lease_lapsed, str(work_id))]
    assert found[1].detail == f"job running under '{OWNER}', lease until {T0 + LEASE}, attempt 1"
    assert await crash(ledger, work_id, LATER) is queue.Recovered.requeued
    assert await status_of(ledger, work_id) is WorkStatus.queued
    assert await audit(ledger) == []


async def test_a_paused_keys_queued_job_is_no_violation(ledger: Any) -> None:
    user, key = await user_with_tokens(ledger, allowance=1000)
    await job(ledger, user, key)
    async with ledger() as session:
        await set_key_status(session, key, KeyStatus.paused)
        await session.commit()
    assert await audit(ledger) == []


# -- Loom Nodes ----------------------------------------------------------------------------------------------


async def test_a_node_cut_by_a_crash_starts_again_and_a_node_left_growing_is_found(ledger: Any) -> None:
    user, key = await user_with_tokens(ledger, allowance=1000)
    async with ledger() as session:
        tree = await looms.create(session, user, "The sky is", T0)
    async with ledger() as session:
        (node,) = await looms.branch(session, tree.loom.id, tree.nodes[0].id, user, key, MODEL, MODEL,
                                     [looms.NewNode({"max_tokens": 8})], {}, T0)
    assert node.work_id is not None
    first, _ = await attempt(ledger, WorkKind.node, node.work_id, 12)
    async with ledger() as session:
        assert await loom_runs.start(session, node.id, first)
        assert await loom_runs.progress(session, node.id, first, " blue", 5)
    assert await crash(ledger, node.work_id, T0 + 2 * LEASE) is queue.Recovered.requeued
    # The Node still says `running` (reads show it queued): its row is queued again, no violation.
    assert await audit(ledger) == []
    second, _ = await attempt(ledger, WorkKind.node, node.work_id, 12, now=T0 + 3 * LEASE)

    async def completed(session: Any) -> None:
        assert await loom_runs.end_within(session, node.id, second, NodeStatus.completed, " grey", None, None, 6)

    async with ledger() as session:
        assert await loom_runs.start(session, node.id, second)
    assert await finish(ledger, node.work_id, second, 6, now=T0 + 3 * LEASE, also=completed)
    assert await audit(ledger) == []
    # The bug: the Node's end was lost while its work row ended.
    await change(ledger, update(LoomNode).where(col(LoomNode.id) == node.id).values(status=NodeStatus.running))
    assert await audit(ledger) == [(Invariant.node_not_ended, str(node.id))]


# -- Playground Runs -------------------------------------------------------------------------------------------


async def test_a_run_cut_by_a_crash_fails_keeps_its_text_and_costs_nothing(ledger: Any) -> None:
    user, _ = await user_with_tokens(ledger, allowance=1000)
    async with ledger() as session:
        (run,) = await runs.create(session, user, [runs.NewRun({"prompt": "The sky is", "max_tokens": 8},
                                                               MODEL, MODEL, MODEL)], T0)
    number, _ = await attempt(ledger, WorkKind.run, run.work_id, 12)
    async with ledger() as session:
        assert await runs.start(session, run.id, number, T0) is not None
    choices = [{"index": 0, "text": " blue", "logprobs": None, "finish_reason": None}]
    usage = {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5}
    async with ledger() as session:
        assert await runs.progress_all(session, [runs.RunGrowth(run.id, number, "cmpl-1", choices, usage)]) == 1

    def failed(work: Work) -> queue.Result:  # the Run's handler's failure (domain/playground/handler.py)
        async def fail_run(session: Any) -> None:
            assert await runs.fail_growing_within(session, work.id, {"code": "internal_error"}, LATER)
        return queue.Result(WorkStatus.failed, 500, "{}", also=fail_run)

    assert await crash(ledger, run.work_id, LATER, failed) is queue.Recovered.failed
    async with ledger() as session:
        cut = await session.get(PlaygroundRun, run.id)
        assert cut is not None
        assert (cut.status, json.loads(cut.choices), cut.used_tokens) == (RunStatus.failed, choices, 0)
    assert await audit(ledger) == []
    # The bug: the cut Run shows the tokens of its released Hold.
    await change(ledger, update(PlaygroundRun).where(col(PlaygroundRun.id) == run.id).values(used_tokens=5))
    assert await audit(ledger) == [(Invariant.run_cut_cost, str(run.id))]
    # Another: the Run never heard that its row failed.
    await change(ledger, update(PlaygroundRun).where(col(PlaygroundRun.id) == run.id)
                 .values(status=RunStatus.running, used_tokens=0))
    assert await audit(ledger) == [(Invariant.run_not_ended, str(run.id))]


# -- Budgets and allowances --------------------------------------------------------------------------------------


async def test_budgets_and_allowances_add_up_over_grants_holds_and_months(ledger: Any) -> None:
    user, key = await user_with_tokens(ledger, allowance=100, budget=500, key_budget=300)
    await settle(ledger, await hold(ledger, user, key, 60), 50)                  # allowance and the key's Budget
    await settle(ledger, await hold(ledger, user, key, 60), 30)                  # the Budget: 40 left in the allowance
    await settle(ledger, await hold(ledger, user, key, 20), None)                # released
    async with ledger() as session:
        await grant(session, user, 200)
    await hold(ledger, user, key, 20)                                            # still held
    december = await hold(ledger, user, key, 30)                                 # in November, settled in December
    await settle(ledger, december, 25, now=T0 + timedelta(days=2))
    assert await audit(ledger) == [(Invariant.hold_held, await _held_id(ledger))]


async def _held_id(ledger: Any) -> str:
    async with ledger() as session:
        return str((await session.exec(select(Hold.id).where(Hold.state == HoldState.held))).one())


async def test_a_settlement_past_its_hold_that_empties_the_budget_is_no_violation(ledger: Any) -> None:
    user, key = await user_with_tokens(ledger, allowance=0, budget=10)
    await settle(ledger, await hold(ledger, user, key, 10), 15)  # the Budget stops at 0, not at -5
    async with ledger() as session:
        budget = (await session.exec(select(Budget.tokens).where(col(Budget.user_id) == user))).one()
    assert budget == 0 and await audit(ledger) == []


@pytest.mark.parametrize("whose", ["user", "key"])
async def test_a_budget_charged_twice_does_not_add_up(ledger: Any, whose: str) -> None:
    user, key = await user_with_tokens(ledger, allowance=0, budget=500, key_budget=300)
    await settle(ledger, await hold(ledger, user, key, 60), 50)
    assert await audit(ledger) == []
    owner = col(Budget.key_id) == key if whose == "key" else col(Budget.key_id).is_(None)
    async with ledger() as session:
        budget_id, tokens = (await session.exec(select(Budget.id, Budget.tokens).where(col(Budget.user_id) == user, owner))
                             ).one()
    # The bug: a second settlement took the 50 tokens again.
    await change(ledger, update(Budget).where(col(Budget.id) == budget_id).values(tokens=tokens - 50))
    found = await violations(ledger)
    granted = 300 if whose == "key" else 500
    assert [(v.invariant, v.subject) for v in found] == [(Invariant.budget_unbalanced, str(budget_id))]
    assert found[0].detail.endswith(f"{tokens - 50} tokens, Grants {granted} − settled and held 50 = {granted - 50}")


async def test_a_budget_below_zero_is_found(ledger: Any) -> None:
    user, key = await user_with_tokens(ledger, allowance=0, budget=50)
    await settle(ledger, await hold(ledger, user, key, 50), 50)
    assert await audit(ledger) == []
    await change(ledger, update(Budget).where(col(Budget.user_id) == user).values(tokens=-3))
    async with ledger() as session:
        budget_id = str((await session.exec(select(Budget.id).where(col(Budget.user_id) == user))).one())
    assert await audit(ledger) == [(Invariant.budget_negative, budget_id), (Invariant.budget_unbalanced, budget_id)]


async def test_a_budget_an_admin_set_is_reported_since_no_grant_records_it(ledger: Any) -> None:
    user, _ = await user_with_tokens(ledger, allowance=0, budget=50)
    async with ledger() as session:
        budget = await set_budget(session, user, 80)
    assert await audit(ledger) == [(Invariant.budget_unbalanced, str(budget.id))]


async def test_an_allowance_that_does_not_add_up_is_found(ledger: Any) -> None:
    user, key = await user_with_tokens(ledger, allowance=100)
    await settle(ledger, await hold(ledger, user, key, 40), 30)
    assert await audit(ledger) == []
    await change(ledger, update(MonthlyUsage).where(col(MonthlyUsage.user_id) == user).values(used=33))
    found = await violations(ledger)
    assert [(v.invariant, v.subject, v.detail) for v in found] == [
        (Invariant.allowance_unbalanced, f"{user}/2026-11", "used 33, settled and held 30")]


async def test_an_allowance_a_settlement_took_past_its_end_is_below_zero(ledger: Any) -> None:
    user, key = await user_with_tokens(ledger, allowance=100)
    await settle(ledger, await hold(ledger, user, key, 100), 104)
    found = await violations(ledger)
    assert [(v.invariant, v.subject, v.detail) for v in found] == [
        (Invariant.allowance_negative, f"{user}/2026-11", "used 104 of an allowance of 100: -4 left")]


# -- the command line ------------------------------------------------------------------------------------------


async def test_the_command_prints_each_invariant_and_exits_1_on_a_violation(
        ledger: Any, db_url: str, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    user, key = await user_with_tokens(ledger, allowance=1000)
    assert run_in_thread(command.main, ["--database-url", db_url]) == 0
    out = capsys.readouterr().out
    assert "hold_held: ok (no Hold is left held)" in out and out.endswith("violations: 0\n")
    held = [str(await hold(ledger, user, key, 10)) for _ in range(7)]
    assert run_in_thread(command.main, ["--database-url", db_url]) == 1
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("hold_held: 7 (no Hold is left held)")
    assert [line.split(":")[0].strip() for line in lines[at + 1:at + 6]] == held[:5]
    assert lines[at + 6] == "  ... and 2 more"
    assert lines[-1] == "violations: 7"
