"""The admin command line (`python -m cluster.admin`), on SQLite and PostgreSQL.

Each test drives `admin.main` as an operator would and reads what it prints;
Holds for the usage views are taken and ended with the ledger's own calls.
The commands run on a fixed clock (NOW), so the tests mean the same on any day.
"""
from __future__ import annotations

import ast
import json
import re
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import pytest_asyncio
from sqlmodel import select

from domain.settings import Settings
from cluster import admin as admin_entry
from cluster.admin_cli import commands as admin
from ledger.accounts import keys
from ledger.store.db import REPO_ROOT, default_database_url, make_engine, session_factory
from ledger.tokens.grants import standing
from ledger.accounts.tables import ApiKey
from ledger.tokens.tables import Counting, Grant, UsageStatus
from ledger.tokens.spend import spend_stop
from ledger.tokens.holds import HoldAsk, Held, end_hold, take_hold
from tests.ledger_fixtures import command_line, db_url, pg_url, run_in_thread  # noqa: F401

TOO_MANY_KEYS = "You have 10 API keys, the most that a User may have. Delete one to make another."
JAN_5 = datetime(2026, 1, 5, 9, tzinfo=timezone.utc)
# The commands' clock: "this month" is March 2026 whatever day the tests run.
NOW = datetime(2026, 3, 14, 12, tzinfo=timezone.utc)

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(db_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:  # noqa: F811
    """Run `python -m cluster.admin ARGS` in process, on NOW: (exit code, stdout, stderr)."""
    config = admin.AdminConfig(database_url=db_url, clock=lambda: NOW)
    return command_line(config, capsys)


@pytest_asyncio.fixture
async def money(db_url: str) -> Any:  # noqa: F811
    """Sessions whose SQLite transactions take the write lock at BEGIN, as Holds need."""
    engine = make_engine(db_url)
    yield session_factory(engine.execution_options(sqlite_begin="IMMEDIATE"))
    await engine.dispose()


def ok(cli: Cli, *argv: str) -> str:
    code, out, err = cli(*argv)
    assert code == 0, err
    return out


def refused(cli: Cli, *argv: str) -> str:
    code, out, err = cli(*argv)
    assert code == 1 and out == "" and err.startswith("error: "), (code, out, err)
    return err.removeprefix("error: ").strip()


def table(out: str) -> list[dict[str, str]]:
    """The rows of a printed table, by its header's column names (cells hold no double spaces)."""
    lines = [line for line in out.splitlines() if line.strip()]
    header = re.split(r"\s{2,}", lines[0].strip())
    return [dict(zip(header, re.split(r"\s{2,}", line.strip()))) for line in lines[1:]]


def fields(out: str) -> dict[str, str]:
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in out.split("\n\n")[0].splitlines())


def make_user(cli: Cli, name: str = "alice", *key_names: str) -> list[str]:
    """A user and keys; the keys' ids, in order."""
    ok(cli, "user", "create", name)
    for key_name in key_names:
        ok(cli, "key", "create", "--user", name, "--name", key_name)
    return [row["ID"] for row in table(ok(cli, "key", "list", "--user", name))]


def keys_by_name(cli: Cli, user: str, *extra: str) -> dict[str, dict[str, str]]:
    return {row["NAME"]: row for row in table(ok(cli, "key", "list", "--user", user, *extra))}


async def user_id(money: Any, name: str) -> uuid.UUID:
    async with money() as session:
        return (await keys.find_user(session, name)).id


async def hold(money: Any, user: uuid.UUID, key: str | None, tokens: int, now: datetime) -> uuid.UUID:
    ask = HoldAsk(user_id=user, key_id=uuid.UUID(key) if key else None, model="tiny-llama",
                  prompt_tokens=0, choices=1, max_tokens=tokens, may_lower=False)
    async with money() as session:
        held = await take_hold(session, ask, now=now)
    assert isinstance(held, Held) and held.tokens == tokens
    return held.hold_id


async def settle(money: Any, hold_id: uuid.UUID, used: int | None, status: UsageStatus, now: datetime) -> None:
    counting = None if used is None else Counting.reported
    async with money() as session:
        assert await end_hold(session, hold_id, used=used, counting=counting, status=status, now=now)


async def spent(money: Any, user: uuid.UUID, key: str | None, tokens: int, used: int | None,
                status: UsageStatus = UsageStatus.completed, at: datetime = JAN_5) -> None:
    """A Completion that started at `at` and ended a minute later; used None: released."""
    hold_id = await hold(money, user, key, tokens, at)
    await settle(money, hold_id, used, status, at + timedelta(minutes=1))


# Users and allowances -------------------------------------------------------------
async def test_user_allowance_sets_and_clears_the_override(cli, money):
    make_user(cli)
    assert ok(cli, "user", "allowance", "alice", "100K") == "The monthly allowance of 'alice' is 100000 tokens.\n"
    assert table(ok(cli, "user", "list"))[0]["MONTHLY ALLOWANCE"] == "100000"
    assert fields(ok(cli, "user", "show", "alice"))["Monthly allowance"] == "100000 tokens a month"
    async with money() as session:
        assert (await standing(session, await user_id(money, "alice"))).allowance == 100_000
    out = ok(cli, "user", "allowance", "alice", "default")
    assert out == "The monthly allowance of 'alice' is the default, 5000000 tokens.\n"
    assert table(ok(cli, "user", "list"))[0]["MONTHLY ALLOWANCE"] == "default"
    assert ok(cli, "user", "allowance", "alice", "0") == "The monthly allowance of 'alice' is 0 tokens.\n"


async def test_user_allowance_refusals(cli):
    make_user(cli)
    assert refused(cli, "user", "allowance", "alice", "-5") == "Tokens must be from 0 to 1000000000000000, not -5."
    assert "not a whole number of tokens" in refused(cli, "user", "allowance", "alice", "lots")
    assert "not a whole number of tokens" in refused(cli, "user", "allowance", "alice", "1.5")
    assert refused(cli, "user", "allowance", "bob", "10") == "No user has the name or id 'bob'."
    assert table(ok(cli, "user", "list"))[0]["MONTHLY ALLOWANCE"] == "default"


async def test_user_show_counts_running_holds_and_lists_key_budgets(cli, money):
    laptop, ci = make_user(cli, "alice", "laptop", "ci")
    ok(cli, "grant", "alice", "1000")
    ok(cli, "grant", "alice", "300", "--key", ci)
    alice, now = await user_id(money, "alice"), NOW
    await spent(money, alice, laptop, 50, 20, at=now)
    await hold(money, alice, ci, 30, now)  # still running: it counts as spent
    out = ok(cli, "user", "show", alice.hex)  # an id works as well as a name
    shown = fields(out)
    assert shown["User"] == "alice" and shown["Id"] == str(alice) and shown["Standing"] == "active"
    assert shown["Monthly allowance"] == "5000000 tokens a month (the default)"
    assert shown["Used this month"] == "50 of the allowance, running Holds included"
    assert shown["Allowance left"] == str(5_000_000 - 50)
    assert shown["Budget left"] == "1000"
    assert shown["Tokens this month"] == "50, every key; 1 Holds running"
    listed = {row["NAME"]: row for row in table(out.split("\n\n")[1])}
    assert listed["laptop"]["BUDGET LEFT"] == "-" and listed["laptop"]["TOKENS THIS MONTH"] == "20"
    assert listed["ci"]["BUDGET LEFT"] == "270" and listed["ci"]["TOKENS THIS MONTH"] == "30"


async def test_user_show_suspended_and_unknown(cli):
    make_user(cli)
    ok(cli, "user", "suspend", "alice")
    assert fields(ok(cli, "user", "show", "alice"))["Standing"] == "suspended"
    assert refused(cli, "user", "show", "nobody") == "No user has the name or id 'nobody'."


# Grants and Budgets -----------------------------------------------------------------
async def test_grant_adds_to_the_users_budget_with_a_note(cli, money):
    make_user(cli)
    assert ok(cli, "grant", "alice", "2.5M", "--note", "approved request") == (
        "Granted 2500000 tokens to the Budget of 'alice': 2500000 left.\n"
    )
    assert ok(cli, "grant", "alice", "1_000") == "Granted 1000 tokens to the Budget of 'alice': 2501000 left.\n"
    alice = await user_id(money, "alice")
    async with money() as session:
        assert (await standing(session, alice)).budget == 2_501_000
        grants = list((await session.exec(select(Grant).where(Grant.user_id == alice))).all())
    assert sorted((g.tokens, g.note, g.key_id) for g in grants) == [(1000, "", None), (2_500_000, "approved request", None)]
    assert fields(ok(cli, "user", "show", "alice"))["Budget left"] == "2501000"


async def test_grant_for_a_key_gives_it_its_own_budget(cli, money):
    laptop, ci = make_user(cli, "alice", "laptop", "ci")
    out = ok(cli, "grant", "alice", "500", "--key", ci, "--note", "for CI")
    assert out == "Granted 500 tokens to the own Budget of the key 'ci' of 'alice': 500 left.\n"
    listed = keys_by_name(cli, "alice")
    assert listed["ci"]["BUDGET LEFT"] == "500" and listed["laptop"]["BUDGET LEFT"] == "-"
    async with money() as session:
        balance = await standing(session, await user_id(money, "alice"), uuid.UUID(ci))
    assert (balance.budget, balance.key_budget) == (0, 500)  # the user's own Budget is untouched


async def test_grant_refusals(cli):
    (laptop,) = make_user(cli, "alice", "laptop")
    (other,) = make_user(cli, "bob", "bobs")
    assert refused(cli, "grant", "alice", "0") == "Tokens must be from 1 to 1000000000000000, not 0."
    assert refused(cli, "grant", "alice", "-5") == "Tokens must be from 1 to 1000000000000000, not -5."
    assert "not a whole number" in refused(cli, "grant", "alice", "5X")
    assert refused(cli, "grant", "alice", "10", "--key", other) == f"'alice' has no API key with the id {other}."
    assert "is not a key id" in refused(cli, "grant", "alice", "10", "--key", "laptop")
    assert "at most 200 characters" in refused(cli, "grant", "alice", "10", "--note", "n" * 201)
    ok(cli, "key", "revoke", laptop)
    assert refused(cli, "grant", "alice", "10", "--key", laptop) == "The key 'laptop' is revoked: it can spend nothing."
    assert refused(cli, "grant", "carol", "10") == "No user has the name or id 'carol'."
    assert fields(ok(cli, "user", "show", "alice"))["Budget left"] == "0"


async def test_budget_set_sets_the_number(cli, money):
    (ci,) = make_user(cli, "alice", "ci")
    ok(cli, "grant", "alice", "1000")
    assert ok(cli, "budget", "set", "alice", "10") == "Set the Budget of 'alice' to 10 tokens.\n"
    assert ok(cli, "budget", "set", "alice", "0") == "Set the Budget of 'alice' to 0 tokens.\n"
    assert ok(cli, "budget", "set", "alice", "70", "--key", ci) == (
        "Set the own Budget of the key 'ci' of 'alice' to 70 tokens.\n"
    )
    async with money() as session:
        balance = await standing(session, await user_id(money, "alice"), uuid.UUID(ci))
    assert (balance.budget, balance.key_budget) == (0, 70)
    assert refused(cli, "budget", "set", "alice", "-1") == "Tokens must be from 0 to 1000000000000000, not -1."
    assert keys_by_name(cli, "alice")["ci"]["BUDGET LEFT"] == "70"


# Keys -----------------------------------------------------------------------------
async def test_key_rename(cli):
    laptop, ci = make_user(cli, "alice", "laptop", "ci")
    assert ok(cli, "key", "rename", laptop, "Desktop") == f"{laptop}\tDesktop\tactive\n"
    assert set(keys_by_name(cli, "alice")) == {"Desktop", "ci"}
    assert ok(cli, "key", "rename", laptop, "desktop") == f"{laptop}\tdesktop\tactive\n"  # its own name, new case
    longest = "x" * 32
    assert ok(cli, "key", "rename", ci, f"  {longest} ") == f"{ci}\t{longest}\tactive\n"
    assert set(keys_by_name(cli, "alice")) == {"desktop", longest}


async def test_key_rename_refusals(cli):
    laptop, ci = make_user(cli, "alice", "laptop", "ci")
    assert refused(cli, "key", "rename", ci, "LAPTOP") == (
        "'alice' has a live key named 'laptop' already; names ignore case."
    )
    assert refused(cli, "key", "rename", ci, "z" * 33) == "A key's name has at most 32 characters; this one has 33."
    assert refused(cli, "key", "rename", ci, "   ") == "A key needs a name of 1 to 32 characters."
    assert "is not a key id" in refused(cli, "key", "rename", "ci", "new")
    missing = str(uuid.uuid4())
    assert refused(cli, "key", "rename", missing, "new") == f"No API key has the id {missing}."
    ok(cli, "key", "revoke", laptop)
    assert refused(cli, "key", "rename", laptop, "old") == (
        "A revoked key cannot be renamed: its name is free for a new key."
    )
    ok(cli, "key", "rename", ci, "laptop")  # the revoked key's name is free again
    everything = table(ok(cli, "key", "list", "--user", "alice", "--all"))
    assert sorted((row["NAME"], row["STATUS"]) for row in everything) == [("laptop", "active"), ("laptop", "revoked")]


async def test_the_eleventh_key_is_refused(cli):
    ids = make_user(cli, "alice", *(f"key-{n}" for n in range(10)))
    ok(cli, "key", "pause", ids[0])  # a paused key counts
    code, out, err = cli("key", "create", "--user", "alice", "--name", "one-more")
    assert (code, out, err) == (1, "", f"error: {TOO_MANY_KEYS}\n")
    ok(cli, "key", "revoke", ids[1])  # a revoked one does not
    code, raw, _ = cli("key", "create", "--user", "alice", "--name", "one-more")
    assert code == 0 and raw.startswith("sk-acs-")
    assert len(keys_by_name(cli, "alice")) == 10


async def test_key_list_shows_tokens_this_month_budget_and_last_use(cli, money):
    laptop, ci = make_user(cli, "alice", "laptop", "ci")
    ok(cli, "grant", "alice", "40", "--key", ci)
    alice, now = await user_id(money, "alice"), NOW
    await spent(money, alice, laptop, 10, 7, at=now)                           # settled: its 7 used
    await spent(money, alice, laptop, 30, None, at=now)                        # released: nothing
    await spent(money, alice, laptop, 9, 9, at=now - timedelta(days=40))      # another month
    await hold(money, alice, laptop, 20, now)                                  # running: all 20
    await spent(money, alice, ci, 5, 3, UsageStatus.stopped, at=now)          # paid from its own Budget too
    before = keys_by_name(cli, "alice")
    assert before["laptop"]["TOKENS THIS MONTH"] == "27" and before["ci"]["TOKENS THIS MONTH"] == "3"
    assert before["laptop"]["BUDGET LEFT"] == "-" and before["ci"]["BUDGET LEFT"] == "37"
    assert before["laptop"]["LAST USED"] == "-"
    assert before["laptop"]["KEY"].startswith("sk-acs-") and before["laptop"]["STATUS"] == "active"
    async with money() as session:
        await keys.authenticate(session, f"Bearer {await raw_key_for(cli, 'alice', 'fresh')}")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", keys_by_name(cli, "alice")["fresh"]["LAST USED"])
    assert list(table(ok(cli, "key", "list", "--user", "alice"))[0]) == [
        "ID", "NAME", "KEY", "STATUS", "TOKENS THIS MONTH", "BUDGET LEFT", "CREATED", "LAST USED"]


async def raw_key_for(cli: Cli, user: str, name: str) -> str:
    code, raw, _ = cli("key", "create", "--user", user, "--name", name)
    assert code == 0
    return raw.strip()


# The spend stop ---------------------------------------------------------------------
async def test_spend_lock_clear_and_show(cli, money):
    ok(cli, "spend", "clear")  # the stop is one row that outlives other tests on PostgreSQL
    try:
        rows = table(ok(cli, "spend", "lock", "--reason", "GPU bill over plan"))
        assert rows[0]["SPEND STOP"] == "locked: new GPU work is refused"
        assert rows[0]["REASON"] == "GPU bill over plan"
        async with money() as session:
            stop = await spend_stop(session)
        assert stop.locked and stop.reason == "GPU bill over plan"
        assert table(ok(cli, "spend", "show")) == rows
        assert "at most 200 characters" in refused(cli, "spend", "lock", "--reason", "r" * 201)
    finally:
        cleared = table(ok(cli, "spend", "clear"))
    assert cleared[0]["SPEND STOP"] == "clear" and cleared[0]["REASON"] == "-"
    async with money() as session:
        assert not (await spend_stop(session)).locked
    assert table(ok(cli, "spend", "show"))[0]["SPEND STOP"] == "clear"


# Usage --------------------------------------------------------------------------------
async def test_usage_counts_settled_tokens_per_utc_day(cli, money):
    laptop, ci = make_user(cli, "alice", "laptop", "ci")
    alice = await user_id(money, "alice")
    late_on_5th = datetime(2026, 1, 5, 23, 30, tzinfo=timezone.utc)
    await spent(money, alice, laptop, 10, 10)
    await spent(money, alice, laptop, 10, 4, UsageStatus.stopped)
    await spent(money, alice, laptop, 50, None)                            # released: not a Completion
    await spent(money, alice, ci, 100, 100, at=late_on_5th)               # its day is when it started
    await spent(money, alice, ci, 8, 6, UsageStatus.failed, at=datetime(2026, 1, 7, 0, 5, tzinfo=timezone.utc))
    await spent(money, alice, laptop, 9, 9, at=datetime(2026, 2, 1, tzinfo=timezone.utc))  # after the range
    out = ok(cli, "usage", "alice", "--from", "2026-01-01", "--to", "2026-01-31")
    assert out.splitlines()[0] == "Usage of 'alice', UTC days 2026-01-01 to 2026-01-31: settled Completions"
    days = table(out.split("\n\n")[0].split("\n", 1)[1])
    assert days == [
        {"DAY": "2026-01-05", "COMPLETIONS": "3", "TOKENS": "114", "COMPLETED": "2", "FAILED": "0", "STOPPED": "1"},
        {"DAY": "2026-01-07", "COMPLETIONS": "1", "TOKENS": "6", "COMPLETED": "0", "FAILED": "1", "STOPPED": "0"},
        {"DAY": "TOTAL", "COMPLETIONS": "4", "TOKENS": "120", "COMPLETED": "2", "FAILED": "1", "STOPPED": "1"},
    ]
    only_ci = ok(cli, "usage", "alice", "--key", ci, "--from", "2026-01-05", "--to", "2026-01-06")
    assert "Usage of 'alice', key 'ci', UTC days 2026-01-05 to 2026-01-06" in only_ci
    assert [row["TOKENS"] for row in table(only_ci.split("\n\n")[0].split("\n", 1)[1])] == ["100", "100"]


async def test_usage_lists_running_holds(cli, money):
    laptop, ci = make_user(cli, "alice", "laptop", "ci")
    alice, now = await user_id(money, "alice"), NOW
    running = await hold(money, alice, ci, 25, now)
    await hold(money, alice, laptop, 5, now + timedelta(seconds=1))
    await spent(money, alice, laptop, 10, 10, at=now)
    out = ok(cli, "usage", "alice")  # this month up to today by default
    holds = table(out.split("Running Holds\n")[1])
    assert [(h["KEY"], h["MODEL"], h["SOURCE"], h["TOKENS HELD"]) for h in holds] == [
        ("ci", "tiny-llama", "api", "25"), ("laptop", "tiny-llama", "api", "5")]
    assert holds[0]["HOLD"] == str(running)
    assert table(out.split("\n\n")[0].split("\n", 1)[1])[-1]["TOKENS"] == "10"  # running ones are not settled
    only_ci = table(ok(cli, "usage", "alice", "--key", ci).split("Running Holds\n")[1])
    assert [h["TOKENS HELD"] for h in only_ci] == ["25"]
    await settle(money, running, 20, UsageStatus.completed, now)
    assert table(ok(cli, "usage", "alice", "--key", ci).split("Running Holds\n")[1]) == []


async def test_usage_refusals(cli):
    make_user(cli, "alice", "laptop")
    (bobs,) = make_user(cli, "bob", "bobs")
    assert refused(cli, "usage", "alice", "--from", "2026-02-01", "--to", "2026-01-31") == (
        "The first day 2026-02-01 comes after the last day 2026-01-31."
    )
    assert refused(cli, "usage", "alice", "--from", "2025-01-01", "--to", "2026-01-31") == (
        "Usage counts at most 366 days at a time; 2025-01-01 to 2026-01-31 is more."
    )
    assert refused(cli, "usage", "alice", "--from", "Jan 1") == "'Jan 1' is not a day: write it as YYYY-MM-DD."
    assert refused(cli, "usage", "alice", "--key", bobs) == f"'alice' has no API key with the id {bobs}."
    assert refused(cli, "usage", "nobody") == "No user has the name or id 'nobody'."


# Background work ----------------------------------------------------------------------
async def alice_with_a_queued_job(cli, money):
    from ledger.work.tables import Work

    (key_id,) = make_user(cli, "alice", "laptop")
    alice = await user_id(money, "alice")
    async with money() as session:
        session.add(Work(kind="job", user_id=alice, key_id=uuid.UUID(key_id), model="llama-8b",
                         model_id="tiny-llama", request="{}", request_id="req_job_1"))
        await session.commit()
    return alice, key_id


async def test_work_list_cancel_and_capacity(cli, money):
    from ledger.work.tables import Work, WorkQueue, WorkStatus

    alice, key_id = await alice_with_a_queued_job(cli, money)
    (row,) = table(ok(cli, "work", "list", "--user", "alice"))
    assert (row["KIND"], row["MODEL"], row["STATUS"], row["ATTEMPTS"], row["RESULT"]) == (
        "job", "llama-8b", "queued", "0", "-")
    assert ok(cli, "work", "cancel", row["ID"]) == f"{row['ID']}\tcancelled\n"
    assert table(ok(cli, "work", "list", "--status", "cancelled"))[0]["ID"] == row["ID"]
    assert table(ok(cli, "work", "list", "--status", "queued")) == []
    assert ok(cli, "work", "capacity", "job", "2") == "job\tat most 2 at once\n"
    async with money() as session:
        assert (await session.get(WorkQueue, "job")).max_running == 2
        assert (await session.get(Work, uuid.UUID(row["ID"]))).status == WorkStatus.cancelled
    assert refused(cli, "work", "cancel", "nope") == "'nope' is not an id of background work (a UUID)."
    assert refused(cli, "work", "cancel", str(uuid.uuid4())).startswith("No background work has the id")


# For scripts: --json ------------------------------------------------------------------
def as_json(cli: Cli, *argv: str) -> Any:
    """A read command's --json output: exactly one JSON document."""
    return json.loads(ok(cli, *argv, "--json"))


def is_utc_time(text: str) -> bool:
    moment = datetime.fromisoformat(text)
    return moment.utcoffset() == timedelta(0)


async def test_user_list_and_show_json(cli, money):
    laptop, ci = make_user(cli, "alice", "laptop", "ci")
    ok(cli, "user", "create", "bob")
    ok(cli, "user", "allowance", "bob", "70K")
    ok(cli, "grant", "alice", "1000")
    ok(cli, "grant", "alice", "300", "--key", ci)
    alice = await user_id(money, "alice")
    await spent(money, alice, laptop, 50, 20, at=NOW)
    await hold(money, alice, ci, 30, NOW)
    users = {user["name"]: user for user in as_json(cli, "user", "list")["users"]}
    assert users["alice"]["id"] == str(alice) and is_utc_time(users["alice"]["created_at"])
    assert {k: users["bob"][k] for k in ("standing", "monthly_allowance", "allowance_is_default")} == {
        "standing": "active", "monthly_allowance": 70_000, "allowance_is_default": False}
    assert (users["alice"]["monthly_allowance"], users["alice"]["allowance_is_default"]) == (5_000_000, True)
    shown = as_json(cli, "user", "show", "alice")
    listed = {key.pop("name"): key for key in shown.pop("keys")}
    assert shown == {
        "id": str(alice), "name": "alice", "standing": "active", "monthly_allowance": 5_000_000,
        "allowance_is_default": True, "allowance_used": 50, "allowance_left": 5_000_000 - 50,
        "budget_left": 1000, "tokens_this_month": 50, "running_holds": 1,
    }
    assert listed["laptop"]["id"] == laptop and listed["laptop"]["user_id"] == str(alice)
    assert (listed["laptop"]["tokens_this_month"], listed["laptop"]["budget_left"]) == (20, None)
    assert (listed["ci"]["tokens_this_month"], listed["ci"]["budget_left"]) == (30, 270)
    assert listed["ci"]["prefix"].startswith("sk-acs-") and listed["ci"]["last_used_at"] is None
    assert is_utc_time(listed["ci"]["created_at"])


async def test_key_list_json(cli, money):
    laptop, ci = make_user(cli, "alice", "laptop", "ci")
    ok(cli, "key", "revoke", ci)
    alice = await user_id(money, "alice")
    listing = as_json(cli, "key", "list", "--user", "alice")
    assert listing["user"] == {"id": str(alice), "name": "alice"}
    assert [(key["id"], key["name"], key["status"]) for key in listing["keys"]] == [(laptop, "laptop", "active")]
    everything = as_json(cli, "key", "list", "--user", "alice", "--all")["keys"]
    assert [(key["id"], key["status"]) for key in everything] == [(laptop, "active"), (ci, "revoked")]


async def test_key_show_by_id_and_by_the_whole_key(cli, money):
    (laptop,) = make_user(cli, "alice", "laptop")
    raw = await raw_key_for(cli, "alice", "ci")
    ci = keys_by_name(cli, "alice")["ci"]["ID"]
    alice = await user_id(money, "alice")
    await spent(money, alice, ci, 10, 7, at=NOW)
    by_raw = ok(cli, "key", "show", raw)
    assert raw not in by_raw
    shown = fields(by_raw)
    assert (shown["Key"], shown["Id"], shown["User"], shown["User id"]) == ("ci", ci, "alice", str(alice))
    assert (shown["Status"], shown["User standing"], shown["Tokens this month"]) == ("active", "active", "7")
    assert shown["Prefix"] == raw[:11] + "..." and shown["Budget left"] == "-" and shown["Last used"] == "-"
    assert fields(ok(cli, "key", "show", f"  {raw}\n")) == shown  # as a script may pass it
    assert fields(ok(cli, "key", "show", ci)) == shown
    document = json.loads(ok(cli, "key", "show", raw, "--json"))
    assert raw not in json.dumps(document)
    assert document["user"] == {"id": str(alice), "name": "alice", "standing": "active"}
    assert (document["key"]["id"], document["key"]["name"], document["key"]["tokens_this_month"]) == (ci, "ci", 7)
    assert as_json(cli, "key", "show", ci) == document
    ok(cli, "key", "revoke", laptop)  # a revoked key is still found: whose was it?
    assert as_json(cli, "key", "show", laptop)["key"]["status"] == "revoked"


async def test_key_show_finds_a_legacy_key_by_its_hash(cli, money):
    make_user(cli, "alice")
    legacy = "acs-bm-" + "x" * 40
    alice = await user_id(money, "alice")
    async with money() as session:
        session.add(ApiKey(user_id=alice, name="old", key_hash=keys.hash_key(legacy), prefix=legacy[:11]))
        await session.commit()
    document = as_json(cli, "key", "show", legacy)
    assert (document["key"]["name"], document["user"]["name"]) == ("old", "alice")


async def test_key_show_of_an_unknown_key(cli):
    make_user(cli, "alice", "laptop")
    secret = "sk-acs-" + "y" * 48
    message = refused(cli, "key", "show", secret)
    assert message == "No API key matches the key given." and secret not in message
    assert refused(cli, "key", "show", "acs-bm-nothing", "--json") == "No API key matches the key given."
    missing = str(uuid.uuid4())
    assert refused(cli, "key", "show", missing) == f"No API key has the id {missing}."
    cut_short = "y" * 48  # a key without its prefix: neither an id nor a key, and not repeated
    assert cut_short not in refused(cli, "key", "show", cut_short)
    assert "Give a key id" in refused(cli, "key", "show", cut_short)


async def test_usage_json(cli, money):
    laptop, ci = make_user(cli, "alice", "laptop", "ci")
    alice = await user_id(money, "alice")
    await spent(money, alice, laptop, 10, 10)
    await spent(money, alice, laptop, 10, 4, UsageStatus.stopped)
    await spent(money, alice, ci, 8, 6, UsageStatus.failed, at=datetime(2026, 1, 7, 0, 5, tzinfo=timezone.utc))
    running = await hold(money, alice, ci, 25, NOW)
    report = as_json(cli, "usage", "alice", "--from", "2026-01-01", "--to", "2026-01-31")
    assert report["user"] == {"id": str(alice), "name": "alice"} and report["key"] is None
    assert (report["from"], report["to"]) == ("2026-01-01", "2026-01-31")
    assert report["days"] == [
        {"day": "2026-01-05", "completions": 2, "tokens": 14, "completed": 1, "failed": 0, "stopped": 1},
        {"day": "2026-01-07", "completions": 1, "tokens": 6, "completed": 0, "failed": 1, "stopped": 0},
    ]
    assert report["total"] == {"completions": 3, "tokens": 20, "completed": 1, "failed": 1, "stopped": 1}
    (held,) = report["running_holds"]
    assert held == {"id": str(running), "started_at": NOW.isoformat(), "key_name": "ci", "model": "tiny-llama",
                    "source": "api", "tokens": 25}
    this_month = as_json(cli, "usage", "alice", "--key", ci)  # the clock's month up to its day
    assert (this_month["from"], this_month["to"], this_month["days"]) == ("2026-03-01", "2026-03-14", [])
    assert this_month["key"] == {"id": ci, "name": "ci"}


async def test_work_list_and_spend_show_json(cli, money):

    alice, key_id = await alice_with_a_queued_job(cli, money)
    (row,) = as_json(cli, "work", "list", "--user", "alice")["work"]
    assert {k: row[k] for k in ("kind", "user_id", "key_id", "model", "status", "attempts", "started_at",
                                "finished_at", "result_status")} == {
        "kind": "job", "user_id": str(alice), "key_id": key_id, "model": "llama-8b", "status": "queued",
        "attempts": 0, "started_at": None, "finished_at": None, "result_status": None}
    ok(cli, "work", "cancel", row["id"])
    (cancelled,) = as_json(cli, "work", "list", "--status", "cancelled")["work"]
    assert cancelled["id"] == row["id"] and cancelled["finished_at"] == NOW.isoformat()  # the commands' clock
    ok(cli, "spend", "clear")
    try:
        locked = as_json(cli, "spend", "lock", "--reason", "over plan")
        assert (locked["locked"], locked["reason"]) == (True, "over plan") and is_utc_time(locked["changed_at"])
        assert as_json(cli, "spend", "show") == locked
    finally:
        cleared = as_json(cli, "spend", "clear")
    assert (cleared["locked"], cleared["reason"]) == (False, None)


# The entry: cluster/admin.py reads the settings --------------------------------------------
async def test_the_entry_hands_the_settings_to_the_commands(db_url, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setenv("ACS_DATABASE_URL", db_url)
    monkeypatch.setenv("ACS_MONTHLY_ALLOWANCE", "123000")
    # Each run of the entry reads the settings of the environment, as each command line does.
    assert run_in_thread(admin_entry.main, ["user", "create", "carol"]) == 0
    assert run_in_thread(admin_entry.main, ["user", "allowance", "carol", "default"]) == 0
    assert run_in_thread(admin_entry.main, ["user", "show", "carol", "--json"]) == 0
    out = capsys.readouterr().out
    assert "The monthly allowance of 'carol' is the default, 123000 tokens." in out
    shown = json.loads(out[out.index("{"):])
    assert (shown["name"], shown["monthly_allowance"], shown["allowance_left"]) == ("carol", 123_000, 123_000)


def test_admin_config_from_settings():
    config = admin_entry.admin_config(Settings(database_url=None, job_result_kept_s=60))
    assert config.database_url == default_database_url()
    assert config.job_result_kept == timedelta(minutes=1) and config.monthly_allowance == 5_000_000
    assert admin_entry.admin_config(Settings(database_url=" sqlite+aiosqlite:///x.db ")).database_url == (
        "sqlite+aiosqlite:///x.db")


@pytest.mark.parametrize("module", ["cluster/admin_cli/commands.py", "ledger/store/db.py"])
def test_the_ledgers_admin_reads_no_settings(module):
    """Layers point down: the ledger imports nothing of `api` (DESIGN.md, "Layers")."""
    tree = ast.parse((REPO_ROOT / module).read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name == "api" or name.startswith("api.")]


# Roles, tags, warm windows, the spend's figures, analytics ------------------------------------------
PRICED = {"tiny-llama": 1.95}  # what a Warm hour costs: the catalog's price of the replica's GPU


@pytest.fixture
def priced_cli(db_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:  # noqa: F811
    """The command line with a catalog whose model costs, and an operator's name."""
    config = admin.AdminConfig(database_url=db_url, clock=lambda: NOW, replica_hour_usd=PRICED, operator="ops")
    return command_line(config, capsys)


async def test_user_role_and_tags(cli):
    make_user(cli, "alice")
    make_user(cli, "bob")
    alice = table(ok(cli, "user", "list"))[0]["ID"]
    assert ok(cli, "user", "role", "alice", "admin") == f"{alice}\talice\tadmin\n"
    assert ok(cli, "user", "tag", "alice", "add", "Hiring 2026 08") == f"{alice}\talice\thiring-2026-08\n"
    assert ok(cli, "user", "tag", "alice", "add", "beta") == f"{alice}\talice\tbeta,hiring-2026-08\n"
    ok(cli, "user", "tag", "bob", "add", "beta")
    rows = {row["NAME"]: row for row in table(ok(cli, "user", "list"))}
    assert (rows["alice"]["ROLE"], rows["alice"]["TAGS"], rows["bob"]["TAGS"]) == (
        "admin", "beta,hiring-2026-08", "beta")
    assert rows["bob"]["ENGAGEMENT"] == "not activated" and rows["bob"]["LAST COMPLETION"] == "-"
    assert [row["NAME"] for row in table(ok(cli, "user", "list", "--tag", "hiring-2026-08"))] == ["alice"]
    shown = fields(ok(cli, "user", "show", "alice"))
    assert (shown["Role"], shown["Tags"]) == ("admin", "beta, hiring-2026-08")
    listed = {user["name"]: user for user in as_json(cli, "user", "list", "--tag", "beta")["users"]}
    assert (listed["alice"]["role"], listed["alice"]["tags"], listed["bob"]["engagement"]) == (
        "admin", ["beta", "hiring-2026-08"], "not_activated")
    assert ok(cli, "user", "tag", "alice", "remove", "HIRING 2026 08") == f"{alice}\talice\tbeta\n"
    assert refused(cli, "user", "tag", "alice", "remove", "hiring-2026-08") == "'alice' has no tag 'hiring-2026-08'."
    assert "lowercase letters, digits and dashes" in refused(cli, "user", "tag", "alice", "add", "x" * 33)
    assert ok(cli, "user", "role", "alice", "user") == f"{alice}\talice\tuser\n"


async def test_warm_add_now_list_and_remove(priced_cli):
    cli = priced_cli
    added = as_json(cli, "warm", "add", "tiny-llama", "--days", "mon-fri", "--from", "09:00", "--to", "17:00")
    assert (added["days"], added["from"], added["to"], added["time_zone"]) == ([1, 2, 3, 4, 5], "09:00", "17:00", "UTC")
    assert (added["hours_per_week"], added["usd_per_week"], added["created_by"]) == (40.0, 78.0, "ops")
    # NOW is Saturday noon: off now, and the next 7 days hold the five days of it.
    assert (added["on_now"], added["next_7_days_usd"]) == (False, 78.0)
    # Friday 22:00 to Saturday 14:00 in Berlin (UTC+1 in March) holds Saturday 12:00 UTC.
    weekend = as_json(cli, "warm", "add", "tiny-llama", "--days", "fri,sat", "--from", "22:00", "--to", "14:00",
                      "--time-zone", "Europe/Berlin")
    assert (weekend["on_now"], weekend["hours_per_week"]) == (True, 32.0)
    now = as_json(cli, "warm", "now", "tiny-llama", "2")
    assert (now["kind"], now["hours"], now["usd"], now["starts_at"]) == ("warm_now", 2.0, 3.9, NOW.isoformat())
    out = ok(cli, "warm", "list")
    rows = {row["ID"]: row for row in table(out)}
    assert rows[added["id"]]["WHEN"] == "mon,tue,wed,thu,fri 09:00-17:00 UTC"
    assert rows[added["id"]]["COST"] == "40 hours a week, $78.00" and rows[added["id"]]["BY"] == "ops"
    assert rows[now["id"]]["WHEN"] == "now, until 2026-03-14 14:00 UTC" and rows[now["id"]]["ON NOW"] == "yes"
    assert ok(cli, "warm", "remove", now["id"]) == (
        f"Removed the window {now['id']} of tiny-llama: 2 hours in all, $3.90.\n")
    assert now["id"] not in {w["id"] for w in as_json(cli, "warm", "list")["windows"]}
    assert refused(cli, "warm", "remove", now["id"]) == f"No warm window has the id {now['id']}."
    assert refused(cli, "warm", "now", "tiny-llama", "25") == (
        "Warm now lasts a whole number of hours from 1 to 24, not 25.")
    assert refused(cli, "warm", "add", "gpt-4", "--days", "mon", "--from", "09:00", "--to", "10:00") == (
        "The model `gpt-4` does not exist. The platform serves tiny-llama.")
    assert "is not a time of day" in refused(cli, "warm", "add", "tiny-llama", "--days", "mon", "--from", "9",
                                             "--to", "10:00")
    assert "is not a list of days" in refused(cli, "warm", "add", "tiny-llama", "--days", "someday", "--from",
                                              "09:00", "--to", "10:00")
    ok(cli, "warm", "remove", added["id"])
    ok(cli, "warm", "remove", weekend["id"])


async def test_spend_show_has_the_last_24_hours_by_model_and_the_changes(priced_cli, money):
    from ledger.tokens.spend import Sample, record_samples

    cli = priced_cli
    ok(cli, "spend", "clear")
    try:
        async with money() as session:
            await record_samples(session, [Sample("tiny-llama", 2, 1, 1.95, 3600)], NOW - timedelta(minutes=1))
        shown = as_json(cli, "spend", "lock", "--reason", "a test")
        assert (shown["last_24h_usd"], shown["pause_usd"], shown["last_counted_at"]) == (
            3.9, 3000.0, (NOW - timedelta(minutes=1)).isoformat())
        assert shown["by_model"] == [{"model": "tiny-llama", "usd": 3.9, "gpu_hours": 2.0}]
        assert [(c["kind"], c["by"], c["reason"]) for c in shown["changes"][:2]] == [
            ("lock", "ops", "a test"), ("clear", "ops", None)]
        out = ok(cli, "spend", "show")
        assert fields(out.split("\n\n")[1])["GPU spend, last 24 hours"] == "$3.90"
        assert table(out.split("Last 24 hours by model\n")[1].split("\n\n")[0]) == [
            {"MODEL": "tiny-llama", "SPEND": "$3.90", "GPU HOURS": "2.00"}]
        assert table(out.split("Changes of the stop\n")[1])[0] == {
            "AT": "2026-03-14 12:00 UTC", "CHANGE": "lock", "BY": "ops", "REASON": "a test"}
    finally:
        ok(cli, "spend", "clear")
        async with money() as session:  # on PostgreSQL the samples outlive the test: take them back
            from sqlalchemy import delete

            from ledger.tokens.tables import SpendSample
            await session.execute(delete(SpendSample).where(SpendSample.at == NOW - timedelta(minutes=1)))
            await session.commit()


async def test_analytics_prints_a_tab_as_json(cli, money):
    (laptop,) = make_user(cli, "alice", "laptop")
    alice = await user_id(money, "alice")
    await spent(money, alice, laptop, 10, 7, at=NOW - timedelta(days=1))
    usage_tab = as_json(cli, "analytics", "usage")  # --json is what it prints anyway
    assert (usage_tab["from"], usage_tab["to"]) == ("2026-03-01", "2026-03-14")
    assert usage_tab["by_user"] == [{"name": "alice", "completions": 1, "tokens": 7}]
    code, out, _ = cli("analytics", "users", "--from", "2026-03-01", "--to", "2026-03-31")
    assert code == 0 and json.loads(out)["active_last_7_days"] == 1
    assert "comes after the last day" in refused(cli, "analytics", "platform", "--from", "2026-03-02", "--to",
                                                 "2026-03-01")
