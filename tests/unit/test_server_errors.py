"""Analytics' Platform tab counts the API's own failures of each UTC day (spec: "Read the platform's
analytics": "the server errors and the timeouts"): each 5xx answer is a server error of its day, and
Inference's 504 upstream_deadline a timeout; a refusal (4xx) is neither. The count is written after the
answer, so the test waits for it."""
from __future__ import annotations

from datetime import date

import pytest
from sqlmodel import select

from ledger.tokens import server_errors
from ledger.tokens.server_errors import ErrorKind, ServerErrorDay
from tests.ledger_fixtures import db_url, pg_url, sessions  # noqa: F401
from tests.spec import assert_error
from tests.unit.test_analytics_counts import tab
from tests.waiting import wait_until

DAY = date(2026, 1, 6)


@pytest.mark.postgres
async def test_a_day_counts_each_kind_in_one_row_and_the_platform_tab_lists_them(sessions):
    for kind in (ErrorKind.server_error, ErrorKind.server_error, ErrorKind.timeout):
        async with sessions() as session:
            await server_errors.count_one(session, DAY, kind)
    async with sessions() as session:
        rows = sorted((row.kind, row.count) for row in await session.exec(select(ServerErrorDay)))
    assert rows == [("server_error", 2), ("timeout", 1)]
    daily = {d["day"]: d for d in (await tab(sessions, "platform"))["daily"]}
    assert (daily["2026-01-06"]["server_errors"], daily["2026-01-06"]["timeouts"]) == (2, 1)
    assert (daily["2026-01-05"]["server_errors"], daily["2026-01-05"]["timeouts"]) == (0, 0)


async def _counts(stack) -> dict[str, int]:
    async with stack.services.sessions() as session:
        today = stack.services.clock().date()
        return {row.kind: row.count for row in await session.exec(
            select(ServerErrorDay).where(ServerErrorDay.day == today))}


async def _complete(stack, **fields):
    return await stack.http.post("/v1/completions", headers=stack.auth(),
                                 json={"model": "tiny-llama", "prompt": "The sky is", "max_tokens": 2, **fields})


async def _counted(stack, kind: str, expected: int) -> None:
    async def held() -> bool:
        return (await _counts(stack)).get(kind, 0) == expected
    await wait_until(held)


@pytest.mark.fake(fail_before_first=ConnectionError("refused"))
async def test_a_5xx_answer_counts_as_a_server_error_of_its_day(fake_stack):
    before = await _counts(fake_stack)
    assert_error(await _complete(fake_stack), 502, "upstream_unreachable")
    await _counted(fake_stack, "server_error", before.get("server_error", 0) + 1)
    assert (await _counts(fake_stack)).get("timeout", 0) == before.get("timeout", 0)


@pytest.mark.fake(first_delay_s=0.6)
@pytest.mark.settings(engine_timeout_s=0.2, long_wait_s=5.0)
async def test_inferences_timeout_counts_as_a_timeout(fake_stack):
    before = await _counts(fake_stack)
    assert_error(await _complete(fake_stack), 504, "upstream_deadline")
    await _counted(fake_stack, "timeout", before.get("timeout", 0) + 1)
    assert (await _counts(fake_stack)).get("server_error", 0) == before.get("server_error", 0)


async def test_a_refusal_counts_for_nothing(fake_stack):
    before = await _counts(fake_stack)
    response = await _complete(fake_stack, nope=1)
    assert_error(response, 400, "invalid_request")
    assert await _counts(fake_stack) == before


def test_a_busy_databases_503_is_not_written_to_that_database():
    from domain import errors
    from domain.server_errors import kind_of

    assert kind_of(errors.DbPoolExhausted("The database is busy.")) is None
    internal = errors.InternalError("The API failed while it handled the request.")
    assert kind_of(internal) == ErrorKind.server_error
