"""The App's Usage page and the 90% notice (spec: "Read your usage", "Your Budget", "How a Hold ends"):
Completions made through the API, then read back with exact numbers.

"The sky is" with max_tokens 2 on llama-8b (the test catalog's tiny-llama, with the Llama 3.1 tokenizer)
is 4 input tokens (BOS included) and 2 output tokens; the fake engine writes every token asked for.
"""
from __future__ import annotations

import uuid
from datetime import date, datetime, timedelta, timezone

import pytest
from sqlalchemy import update

from ledger.tokens import grants
from ledger.store.coltypes import utcnow
from ledger.tokens.tables import Counting, Hold, UsageStatus
from ledger.tokens.holds import HoldAsk, end_hold, month_of, take_hold
from tests.own_account import OwnAccount, sign_in
from tests.spec import assert_error

MODEL = "tiny-llama"  # what llama-8b resolves to in the test catalog


def _today() -> date:
    return utcnow().date()


async def _key_id(account: OwnAccount, name: str = "laptop") -> str:
    return next(k["id"] for k in (await account.ok("GET", "/account/keys"))["data"] if k["name"] == name)


async def _move_holds(stack, user_id: uuid.UUID, to: datetime) -> None:
    """Date the User's Completions back (the ledger stamps them with the real time)."""
    async with stack.services.ledger.write_sessions() as session:
        await session.execute(update(Hold).where(Hold.user_id == user_id).values(created_at=to, month=month_of(to)))
        await session.commit()


async def _set_allowance(stack, user_id: uuid.UUID, tokens: int) -> None:
    async with stack.services.ledger.write_sessions() as session:
        await grants.set_allowance(session, user_id, tokens)


async def _usage_numbers(fake_stack) -> None:
    account = await sign_in(fake_stack)
    cluster = await account.ok("POST", "/account/keys", {"name": "cluster"}, status=201)
    assert (await account.completion()).status_code == 200
    assert (await account.completion(cluster["key"], max_tokens=5)).status_code == 200
    page = await account.ok("GET", "/account/usage")
    today = _today()
    assert (page["from"], page["to"]) == (today.replace(day=1).isoformat(), today.isoformat())
    assert page["tokens"] == {"input": 8, "output": 7, "total": 15}
    assert page["completions"] == {"count": 2, "running": 0}
    next_month = (today.replace(day=28) + timedelta(days=4)).replace(day=1)
    assert page["allowance"] == {"total": 5_000_000, "used": 15, "left": 4_999_985,
                                 "resets_on": next_month.isoformat()}
    assert (page["budget"], page["key_budget"]) == ({"left": 0}, None)
    assert page["days"] == [{"day": (today.replace(day=1) + timedelta(days=n)).isoformat(),
                             "input": 8 if n == today.day - 1 else 0, "output": 7 if n == today.day - 1 else 0}
                            for n in range(today.day)]
    assert page["by_model"] == [{"model": MODEL, "input": 8, "output": 7, "total": 15}]
    assert page["by_source"] == [{"source": "api", "completions": 2, "input": 8, "output": 7, "total": 15}]
    assert [(k["name"], k["status"], k["input"], k["output"], k["last_month"], k["all_time"], k["budget_left"])
            for k in page["by_key"]] == [("cluster", "active", 4, 5, 0, 9, None),
                                         ("laptop", "active", 4, 2, 0, 6, None)]
    assert all(k["last_used_at"] for k in page["by_key"])
    recent = page["recent"]
    assert [(r["key"], r["model"], r["source"], r["input"], r["output"], r["counted"], r["status"])
            for r in recent] == [("cluster", MODEL, "api", 4, 5, "reported", "completed"),
                                 ("laptop", MODEL, "api", 4, 2, "reported", "completed")]
    assert all(isinstance(r["duration_ms"], int) and r["duration_ms"] >= 0 for r in recent)
    assert recent[0]["started_at"] >= recent[1]["started_at"]
    assert page["budget_changes"] == []
    assert page["notice"] == {"show": False, "left": 4_999_985, "text": "You have 4,999,985 tokens left."}
    assert page["updated_at"].endswith("+00:00")


async def test_usage_counts_the_completions_of_every_key(fake_stack):
    await _usage_numbers(fake_stack)


@pytest.mark.postgres
async def test_usage_counts_the_completions_of_every_key_on_postgres(fake_stack):
    await _usage_numbers(fake_stack)  # UTC days are counted apart on each backend


async def test_a_grant_shows_in_the_budget_and_its_history(fake_stack):
    account = await sign_in(fake_stack)
    key_id = uuid.UUID(await _key_id(account))
    async with fake_stack.services.ledger.write_sessions() as session:
        await grants.grant(session, account.user_id, 50_000, note="welcome")
    async with fake_stack.services.ledger.write_sessions() as session:
        await grants.grant(session, account.user_id, 700, key_id=key_id, note="a cap for the laptop")
    assert (await account.completion()).status_code == 200
    page = await account.ok("GET", "/account/usage")
    assert page["budget"] == {"left": 50_000}  # the allowance paid for the Completion
    assert [(c["tokens"], c["what"], c["key"], c["note"]) for c in page["budget_changes"]] == [
        (700, "grant", "laptop", "a cap for the laptop"), (50_000, "grant", None, "welcome")]
    only_key = await account.ok("GET", f"/account/usage?key={key_id}")
    assert only_key["key_budget"] == {"left": 694}
    assert only_key["by_key"][0]["budget_left"] == 694


async def test_one_key_or_one_model_alone(fake_stack):
    account = await sign_in(fake_stack)
    cluster = await account.ok("POST", "/account/keys", {"name": "cluster"}, status=201)
    assert (await account.completion()).status_code == 200
    assert (await account.completion(cluster["key"], max_tokens=5)).status_code == 200
    page = await account.ok("GET", f"/account/usage?key={cluster['id']}")
    assert page["tokens"] == {"input": 4, "output": 5, "total": 9}
    assert [k["name"] for k in page["by_key"]] == ["cluster"] and [r["key"] for r in page["recent"]] == ["cluster"]
    # The allowance and the Budget are the account's, whatever the choice.
    assert page["allowance"]["used"] == 15 and page["key_budget"] is None
    by_alias = await account.ok("GET", "/account/usage?model=llama-8b")
    assert by_alias["tokens"]["total"] == 15 and by_alias["by_model"][0]["model"] == MODEL
    other = await account.ok("GET", "/account/usage?model=llama-405b")
    assert other["tokens"]["total"] == 0 and other["by_key"] == [] and other["recent"] == []


async def test_another_users_key_is_not_found_and_a_revoked_key_still_counts(fake_stack):
    mine, theirs = await sign_in(fake_stack), await sign_in(fake_stack)
    their_key = await _key_id(theirs)
    assert_error(await mine.call("GET", f"/account/usage?key={their_key}"), 404, "key_not_found")
    assert_error(await mine.call("GET", "/account/usage?key=laptop"), 400, "invalid_request", param="key")
    assert (await mine.completion()).status_code == 200
    key_id = await _key_id(mine)
    await mine.ok("POST", f"/account/keys/{key_id}/revoke")
    page = await mine.ok("GET", f"/account/usage?key={key_id}")
    assert [(k["name"], k["status"], k["all_time"]) for k in page["by_key"]] == [("laptop", "revoked", 6)]


async def test_ranges_count_their_utc_days(fake_stack):
    account = await sign_in(fake_stack)
    assert (await account.completion()).status_code == 200
    today = _today()
    last_month_day = today.replace(day=1) - timedelta(days=1)
    await _move_holds(fake_stack, account.user_id, datetime.combine(last_month_day, datetime.min.time(),
                                                                     tzinfo=timezone.utc) + timedelta(hours=23))
    assert (await account.completion()).status_code == 200  # today's
    counts = {}
    for name in ("today", "last_7_days", "last_30_days", "this_month", "last_month"):
        page = await account.ok("GET", f"/account/usage?range={name}")
        counts[name] = (page["from"], page["to"], page["tokens"]["total"], len(page["days"]))
    assert counts["today"] == (today.isoformat(), today.isoformat(), 6, 1)
    assert counts["last_7_days"][:2] == ((today - timedelta(days=6)).isoformat(), today.isoformat())
    thirty_back = today - timedelta(days=29)
    assert counts["last_30_days"][:3] == (thirty_back.isoformat(), today.isoformat(),
                                          12 if thirty_back <= last_month_day else 6)
    assert counts["this_month"] == (today.replace(day=1).isoformat(), today.isoformat(), 6, today.day)
    assert counts["last_month"] == (last_month_day.replace(day=1).isoformat(), last_month_day.isoformat(), 6,
                                    last_month_day.day)
    by_key = (await account.ok("GET", "/account/usage"))["by_key"][0]
    assert (by_key["input"] + by_key["output"], by_key["last_month"], by_key["all_time"]) == (6, 6, 12)
    days = await account.ok("GET", f"/account/usage?from={last_month_day}&to={last_month_day}")
    assert days["days"] == [{"day": last_month_day.isoformat(), "input": 4, "output": 2}]


async def test_366_days_at_most_and_the_querys_400s(fake_stack):
    account = await sign_in(fake_stack, key_name=None)
    assert len((await account.ok("GET", "/account/usage?from=2025-01-01&to=2026-01-01"))["days"]) == 366
    assert_error(await account.call("GET", "/account/usage?from=2025-01-01&to=2026-01-02"), 400, "invalid_request",
                 param="from", message="Usage counts at most 366 days at a time; 2025-01-01 to 2026-01-02 is more.")
    assert_error(await account.call("GET", "/account/usage?from=2025-02-01&to=2025-01-01"), 400, "invalid_request",
                 param="from", message="The first day 2025-02-01 comes after the last day 2025-01-01.")
    assert_error(await account.call("GET", "/account/usage?from=2025-02-01"), 400, "invalid_request", param="to",
                 message="Missing required parameter: 'to'.")
    assert_error(await account.call("GET", "/account/usage?from=1%20May&to=2025-05-02"), 400, "invalid_request",
                 param="from", message="'1 May' is not a day: write it as YYYY-MM-DD.")
    assert_error(await account.call("GET", "/account/usage?range=today&from=2025-01-01&to=2025-01-02"), 400,
                 "invalid_request", param="range", message="Choose a range, or from and to, not both.")
    assert_error(await account.call("GET", "/account/usage?range=yesterday"), 400, "invalid_request",
                 param="range", message="Invalid value for 'range': expected one of today, last_7_days, "
                                        "last_30_days, this_month, last_month.")
    assert_error(await account.call("GET", "/account/usage?user=someone"), 400, "invalid_request", param="user")


async def test_a_running_completion_and_a_cut_one(fake_stack):
    """A running Completion counts without tokens yet; a cut stream's tokens are input first."""
    account = await sign_in(fake_stack)
    key_id = uuid.UUID(await _key_id(account))
    holds = []
    async with fake_stack.services.ledger.write_sessions() as session:
        for _ in range(3):
            ask = HoldAsk(account.user_id, key_id, MODEL, prompt_tokens=4, choices=1, max_tokens=10, may_lower=False)
            holds.append(await take_hold(session, ask))
    async with fake_stack.services.ledger.write_sessions() as session:
        await end_hold(session, holds[1].hold_id, used=3, counting=Counting.partial, status=UsageStatus.stopped)
    async with fake_stack.services.ledger.write_sessions() as session:  # released: no Completion
        await end_hold(session, holds[2].hold_id, used=None, counting=None, status=UsageStatus.failed)
    page = await account.ok("GET", "/account/usage")
    assert page["completions"] == {"count": 2, "running": 1}
    assert page["tokens"] == {"input": 3, "output": 0, "total": 3}
    assert [(r["input"], r["output"], r["counted"], r["status"], r["duration_ms"] is None) for r in page["recent"]] == [
        (3, 0, "partial", "stopped", False), (0, 0, None, "running", True)]
    # The running Hold's 14 tokens are spent until it ends: the allowance leaves them out.
    assert page["allowance"]["used"] == 17 and page["allowance"]["left"] == 5_000_000 - 17


async def _notice_after(stack, allowance: int, max_tokens: int, budget: int = 0) -> dict:
    account = await sign_in(stack)
    await _set_allowance(stack, account.user_id, allowance)
    if budget:
        async with stack.services.ledger.write_sessions() as session:
            await grants.grant(session, account.user_id, budget)
    assert (await account.completion(max_tokens=max_tokens)).status_code == 200
    notice = await account.ok("GET", "/account/notice")
    assert (await account.ok("GET", "/account/usage"))["notice"] == notice
    return notice


async def test_the_notice_shows_from_90_percent_used(fake_stack):
    assert await _notice_after(fake_stack, 100, 85) == {"show": False, "left": 11, "text": "You have 11 tokens left."}
    assert await _notice_after(fake_stack, 100, 86) == {"show": True, "left": 10, "text": "You have 10 tokens left."}
    # The Budget counts as tokens left: 90 used of 100 + 1000 is far from the end.
    assert (await _notice_after(fake_stack, 100, 86, budget=1000))["show"] is False
    assert await _notice_after(fake_stack, 6, 2) == {"show": True, "left": 0, "text": "You have no tokens left."}


async def test_the_routes_take_a_session(fake_stack):
    for path in ("/account/usage", "/account/notice", "/account/models"):
        assert_error(await fake_stack.http.get(path), 401, "session_ended")


async def test_models_for_the_filters(fake_stack):
    account = await sign_in(fake_stack, key_name=None)
    models = (await account.ok("GET", "/account/models"))["data"]
    assert [(m["id"], m["default"]) for m in models] == [(MODEL, True)] and models[0]["name"]
    # The Playground checks its settings against the model's limits, as GET /v1/models lists them.
    assert models[0]["capabilities"]["n_layers"] == 4 and models[0]["capabilities"]["max_logprobs"] > 0


async def test_a_models_status_for_the_playground(fake_stack):
    """The Playground's model-start line reads GET /v1/models/{model}/status with the session."""
    assert_error(await fake_stack.http.get("/account/models/llama-8b/status"), 401, "session_ended")
    account = await sign_in(fake_stack, key_name=None)
    status = await account.ok("GET", "/account/models/llama-8b/status")
    assert status["id"] == MODEL and status["object"] == "model.status" and isinstance(status["warm"], bool)
    answer = await account.call("GET", "/account/models/gpt-2/status")
    assert_error(answer, 400, "model_not_found")
