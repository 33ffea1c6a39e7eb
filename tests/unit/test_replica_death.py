"""A model replica that dies under background work (the chaos soak's kills): Ray's error is Inference
failing, mapped once (domain/inference/gateway.py `map_failure`) to 502 `upstream_unreachable`, as
POST /v1/completions answers it; never the API's own failure. A Job pays nothing (a request without
a stream that failed); a Loom Node pays what its stream sent, or nothing before its first token; and
the ledger audit finds nothing. The Playground's Runs: tests/unit/test_playground_runs.py.
"""
from __future__ import annotations

import pytest
from ray.exceptions import ActorDiedError

from ledger.audit import find_violations
from ledger.store.coltypes import utcnow
from ledger.tokens.tables import Counting, HoldState
from tests.spec import assert_error
from tests.unit.test_jobs import Jobs, jobs  # noqa: F401 - jobs: the fixture
from tests.unit.test_loom_nodes import Looms, fake_text, looms  # noqa: F401 - looms: the fixture
from tests.unit.test_playground_runs import UNREACHABLE

pytestmark = pytest.mark.postgres


async def audit_of(jobs: Jobs, *subjects: str) -> list[str]:
    """The audit's violations about `subjects` (work rows, Holds)."""
    found = await find_violations(jobs.stack.services.sessions, now=utcnow())
    return [f"{violation.invariant}: {violation.detail}" for violation in found if violation.subject in subjects]


@pytest.mark.fake(delay_s=0.02, fail_after_tokens=2, fail_with=ActorDiedError())
async def test_a_job_whose_replica_dies_fails_with_upstream_unreachable_and_costs_nothing(jobs: Jobs) -> None:
    job = (await jobs.submit({"model": "llama-8b", "prompt": "The sky is", "max_tokens": 8})).json()
    jobs.runner()
    await jobs.wait(job["id"], "failed")
    result = await jobs.get(job["id"], "/result")
    error = assert_error(result, 502, "upstream_unreachable", request_id=job["request_id"])
    assert {key: error[key] for key in UNREACHABLE} == UNREACHABLE
    (hold,) = await jobs.holds(job["request_id"])
    assert (hold.state, hold.used) == (HoldState.released, 0)  # no stream: Inference reported no usage
    assert await audit_of(jobs, job["id"], str(hold.id)) == []


@pytest.mark.fake(delay_s=0.02, fail_after_tokens=3, fail_with=ActorDiedError())
async def test_a_node_whose_replica_dies_mid_stream_fails_with_upstream_unreachable_and_pays_what_it_sent(
        looms: Looms) -> None:
    loom_id, node = await looms.grow({"model": "llama-8b", "max_tokens": 10})
    looms.runner()
    failed = await looms.wait(loom_id, node["id"], "failed")
    assert failed["text"] == fake_text(3) and failed["error"] == UNREACHABLE
    (hold,) = await looms.node_holds(node["id"])
    assert (hold.state, hold.used, hold.counting) == (HoldState.settled, 4 + 3, Counting.partial)
    (row,) = await looms.node_rows()
    assert await audit_of(looms, str(row.id), str(hold.id)) == []


@pytest.mark.fake(first_delay_s=0.1, fail_before_first=ActorDiedError())
async def test_a_node_whose_replica_dies_before_its_first_token_fails_and_costs_nothing(looms: Looms) -> None:
    loom_id, node = await looms.grow()
    looms.runner()
    failed = await looms.wait(loom_id, node["id"], "failed")
    assert failed["text"] == "" and failed["error"] == UNREACHABLE
    (hold,) = await looms.node_holds(node["id"])
    assert (hold.state, hold.used) == (HoldState.released, 0)
    (row,) = await looms.node_rows()
    assert await audit_of(looms, str(row.id), str(hold.id)) == []
