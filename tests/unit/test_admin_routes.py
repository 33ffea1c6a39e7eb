"""The admin routes under /v1/admin, through HTTP on the fake stack: an admin's key does each thing
the command line does, a normal User's key gets 403 on every route, no key 401.

Each test has a ledger of its own (a new SQLite file; marked `postgres`: an emptied PostgreSQL
database too), so the numbers of Analytics and the spend stop are the test's alone. Holds for usage and
engagement are taken and ended with the ledger's own calls, as tests/unit/test_admin.py does.
"""
from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timedelta
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from api.app import create_app
from cluster.admin_cli import commands as cli
from ledger.store.coltypes import utcnow
from ledger.store.db import make_engine, session_factory
from ledger.accounts.keys import create_api_key, create_user
from ledger.accounts.tables import Role
from ledger.tokens.tables import Counting, UsageSource, UsageStatus
from ledger.tokens.spend import Sample, record_samples
from ledger.tokens.holds import Held, HoldAsk, end_hold, take_hold
from tests.conftest import build_stack, fresh_postgres
from tests.fakes import FakeEngine
from tests.ledger_fixtures import empty_ledger, run_in_thread
from tests.spec import assert_error

ADMIN_NAME = "root"
SOME_ID = "01a12e70-9370-7a9b-87d6-4c3d2621969e"
# Every admin route, with ids that need not exist: the admin check comes before the route reads them.
ROUTES = [
    ("GET", "/v1/admin/users"), ("POST", "/v1/admin/users"), ("GET", "/v1/admin/users/{id}"),
    ("POST", "/v1/admin/users/{id}/suspend"), ("POST", "/v1/admin/users/{id}/restore"),
    ("POST", "/v1/admin/users/{id}/allowance"), ("POST", "/v1/admin/users/{id}/role"),
    ("POST", "/v1/admin/users/bulk"), ("POST", "/v1/admin/users/{id}/details"),
    ("POST", "/v1/admin/users/{id}/delete"),
    ("POST", "/v1/admin/users/{id}/tags"), ("DELETE", "/v1/admin/users/{id}/tags/some-tag"),
    ("POST", "/v1/admin/users/{id}/grants"), ("POST", "/v1/admin/users/{id}/budget"),
    ("GET", "/v1/admin/users/{id}/keys"), ("POST", "/v1/admin/users/{id}/keys"),
    ("POST", "/v1/admin/users/{id}/keys/{id}/pause"), ("POST", "/v1/admin/users/{id}/keys/{id}/resume"),
    ("POST", "/v1/admin/users/{id}/keys/{id}/revoke"), ("GET", "/v1/admin/users/{id}/usage"),
    ("GET", "/v1/admin/users/{id}/notes"), ("POST", "/v1/admin/users/{id}/notes"),
    ("DELETE", "/v1/admin/users/{id}/notes/{id}"), ("GET", "/v1/admin/users/{id}/application"),
    ("GET", "/v1/admin/users/{id}/usage-page"),
    ("GET", "/v1/admin/spend"), ("POST", "/v1/admin/spend/lock"), ("POST", "/v1/admin/spend/clear"),
    ("GET", "/v1/admin/warm-windows"), ("POST", "/v1/admin/warm-windows"), ("POST", "/v1/admin/warm-windows/now"),
    ("DELETE", "/v1/admin/warm-windows/{id}"),
    ("GET", "/v1/admin/analytics/users"), ("GET", "/v1/admin/analytics/budget"),
    ("GET", "/v1/admin/analytics/platform"), ("GET", "/v1/admin/analytics/usage"),
    ("GET", "/v1/admin/applications"), ("GET", "/v1/admin/applications/{id}"),
    ("POST", "/v1/admin/applications/{id}/approve"), ("POST", "/v1/admin/applications/{id}/reject"),
    ("POST", "/v1/admin/invites"),
    ("GET", "/v1/admin/token-requests"), ("GET", "/v1/admin/token-requests/{id}"),
    ("POST", "/v1/admin/token-requests/{id}/approve"), ("POST", "/v1/admin/token-requests/{id}/reject"),
    ("GET", "/v1/admin/feedback"), ("GET", "/v1/admin/feedback/{id}/screenshots/{id}"),
]
L40S_HOUR = 1.95  # what the catalog says an hour of llama-8b's GPU costs


class Admin:
    """The stack, an admin's key, and the stack's own key of a normal User."""

    def __init__(self, stack: Any, key: str, url: str) -> None:
        self.stack, self.key, self.url = stack, key, url

    async def call(self, method: str, path: str, body: Any = None, key: str | None = None, **kwargs: Any) -> Any:
        headers = {} if key == "" else {"Authorization": f"Bearer {key or self.key}"}
        headers.update(kwargs.pop("headers", {}))
        if body is not None:
            kwargs["json"] = body
        return await self.stack.http.request(method, path, headers=headers, **kwargs)

    async def ok(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        response = await self.call(method, path, body, **kwargs)
        assert response.status_code == 200, response.text
        return response.json()

    async def user(self, name: str) -> str:
        return (await self.ok("POST", "/v1/admin/users", {"name": name}))["id"]

    async def key_of(self, user_id: str, name: str = "laptop") -> tuple[str, str]:
        made = await self.ok("POST", f"/v1/admin/users/{user_id}/keys", {"name": name})
        return made["id"], made["key"]

    async def completion(self, key: str) -> Any:
        return await self.stack.http.post("/v1/completions", headers={"Authorization": f"Bearer {key}"},
                                          json={"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2})

    async def spent(self, user_id: str, key_id: str | None, used: int, at: datetime, model: str = "tiny-llama",
                    source: UsageSource = UsageSource.api, status: UsageStatus = UsageStatus.completed) -> None:
        """A Completion that started at `at` and ended a second later, settled to `used` tokens."""
        ask = HoldAsk(user_id=uuid.UUID(user_id), key_id=uuid.UUID(key_id) if key_id else None, model=model,
                      prompt_tokens=0, choices=1, max_tokens=used, may_lower=False, source=source)
        async with self.stack.services.ledger.write_sessions() as session:
            held = await take_hold(session, ask, now=at)
        assert isinstance(held, Held)
        async with self.stack.services.ledger.write_sessions() as session:
            await end_hold(session, held.hold_id, used=used, counting=Counting.reported, status=status,
                           now=at + timedelta(seconds=1))


@pytest.fixture(scope="session")
def admin_pg_url() -> str:
    from tests.ledger_fixtures import run_async

    return run_async(fresh_postgres, "acs_test_admin_routes")


@pytest_asyncio.fixture
async def admin(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Admin]:
    url = await empty_ledger(request, tmp_path, "admin_pg_url")
    engine = make_engine(url)
    settings = request.node.get_closest_marker("settings")
    stack = await build_stack(FakeEngine(), session_factory(engine), **(settings.kwargs if settings else {}))
    async with stack.services.ledger.write_sessions() as session:
        root = await create_user(session, ADMIN_NAME)
        root.role = Role.admin
        _, key = await create_api_key(session, root.id, "admin")
        await session.commit()
    yield Admin(stack, key, url)
    await stack.http.aclose()
    await engine.dispose()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "admin" in metafunc.fixturenames:
        on_postgres = metafunc.definition.get_closest_marker("postgres") is not None
        metafunc.parametrize("admin", ["sqlite", "postgresql"] if on_postgres else ["sqlite"], indirect=True)


def priced(stack: Any, model_id: str = "tiny-llama", gpus: int = 1, hour_usd: float = L40S_HOUR) -> None:
    """Give the test catalog's CPU model a GPU and its price, as llama-8b has on a cluster."""
    spec = stack.services.catalog.models[model_id]
    options = spec.ray_actor_options.model_copy(update={"num_gpus": gpus})
    stack.services.catalog.models[model_id] = spec.model_copy(update={"gpu_hour_usd": hour_usd,
                                                                      "ray_actor_options": options})


# Who may call them ------------------------------------------------------------------------
@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_a_normal_users_key_gets_403_and_no_key_401_on_every_admin_route(admin, method, path):
    path = path.replace("{id}", SOME_ID)
    assert_error(await admin.call(method, path, key=admin.stack.key), 403, "admin_only",
                 message="This route is for admins.", param=None, type="invalid_request_error",
                 headers={"x-should-retry": "false"})
    assert_error(await admin.call(method, path, key=""), 401, "missing_authorization")
    assert_error(await admin.call(method, path, key="sk-acs-" + "x" * 48), 401, "invalid_api_key")


def test_the_refusal_test_covers_every_admin_route():
    app = create_app()
    served = {(method, re.sub(r"\{[a-z_]+\}", "{id}", route.path)) for route in app.routes
              if route.path.startswith("/v1/admin") for method in route.methods}
    listed = {(method, path.replace("some-tag", "{id}")) for method, path in ROUTES}
    assert served == listed


async def test_an_admin_made_by_the_routes_may_use_them_and_a_demoted_one_may_not(admin):
    alice = await admin.user("alice")
    _, alice_key = await admin.key_of(alice)
    assert_error(await admin.call("GET", "/v1/admin/users", key=alice_key), 403, "admin_only")
    assert (await admin.ok("POST", f"/v1/admin/users/{alice}/role", {"role": "admin"}))["role"] == "admin"
    assert (await admin.call("GET", "/v1/admin/spend", key=alice_key)).status_code == 200
    await admin.ok("POST", f"/v1/admin/users/{alice}/role", {"role": "user"})
    assert_error(await admin.call("GET", "/v1/admin/spend", key=alice_key), 403, "admin_only")


async def test_an_admin_cannot_demote_or_suspend_itself(admin):
    root = next(u["id"] for u in (await admin.ok("GET", "/v1/admin/users"))["users"] if u["name"] == ADMIN_NAME)
    assert_error(await admin.call("POST", f"/v1/admin/users/{root}/role", {"role": "user"}), 400,
                 "invalid_request", param="role", message="You cannot change your own role: ask another admin.")
    assert_error(await admin.call("POST", f"/v1/admin/users/{root}/suspend"), 400, "invalid_request",
                 message="You cannot suspend yourself: ask another admin.")
    assert (await admin.ok("POST", f"/v1/admin/users/{root}/role", {"role": "admin"}))["role"] == "admin"


async def test_a_suspended_admin_gets_the_401_of_a_suspended_account(admin):
    other = await admin.user("other-admin")
    _, other_key = await admin.key_of(other)
    await admin.ok("POST", f"/v1/admin/users/{other}/role", {"role": "admin"})
    await admin.ok("POST", f"/v1/admin/users/{other}/suspend")
    assert_error(await admin.call("GET", "/v1/admin/users", key=other_key), 401, "account_suspended")


# Strict reading -----------------------------------------------------------------------------
async def test_bodies_queries_and_path_ids_are_read_strictly(admin):
    alice = await admin.user("alice")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/grants", {"tokens": 5, "amount": 5}), 400,
                 "invalid_request", param="amount", message="Unknown parameter: 'amount'.")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/suspend", {"why": "x"}), 400,
                 "invalid_request", param="why")
    assert_error(await admin.call("POST", "/v1/admin/spend/lock", [1]), 400, "invalid_request",
                 message="Invalid type for the request body: expected an object.")
    assert_error(await admin.call("POST", "/v1/admin/users", content=b"{nope",
                                  headers={"Content-Type": "application/json"}), 400, "bad_json")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/grants", {}), 400, "invalid_request",
                 param="tokens", message="Missing required parameter: 'tokens'.")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/grants", {"tokens": True}), 400,
                 "invalid_request", param="tokens")
    assert_error(await admin.call("POST", "/v1/admin/users", {"name": 7}), 400, "invalid_request", param="name",
                 message="Invalid type for 'name': expected a string.")
    assert_error(await admin.call("GET", "/v1/admin/users?sort=name"), 400, "invalid_request", param="sort")
    assert_error(await admin.call("GET", "/v1/admin/users/alice"), 400, "invalid_request", param="user_id",
                 message=f"Invalid value for 'user_id': expected a User id, a UUID such as {SOME_ID}.")
    assert_error(await admin.call("GET", f"/v1/admin/users/{SOME_ID}"), 404, None,
                 message=f"No user has the id {SOME_ID}.")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/keys/nope/pause"), 400, "invalid_request",
                 param="key_id")
    assert_error(await admin.call("GET", f"/v1/admin/users/{alice}/keys?all=yes"), 400, "invalid_request",
                 param="all")


# Users ----------------------------------------------------------------------------------------
@pytest.mark.postgres
async def test_users_list_show_and_their_engagement(admin):
    alice, bob, carol, dave = [await admin.user(name) for name in ("alice", "bob", "carol", "dave")]
    now = utcnow()
    await admin.spent(alice, None, 10, now - timedelta(days=2))
    await admin.spent(bob, None, 20, now - timedelta(days=10))
    await admin.spent(carol, None, 30, now - timedelta(days=20))
    await admin.ok("POST", f"/v1/admin/users/{alice}/tags", {"tag": "Hiring 2026 08"})
    listed = {u["name"]: u for u in (await admin.ok("GET", "/v1/admin/users"))["users"]}
    assert [listed[n]["engagement"] for n in ("alice", "bob", "carol", "dave")] == [
        "active", "cooling", "churned", "not_activated"]
    assert listed["alice"]["tags"] == ["hiring-2026-08"] and listed["bob"]["tags"] == []
    assert listed[ADMIN_NAME]["role"] == "admin" and listed["alice"]["role"] == "user"
    assert (listed["alice"]["tokens_last_30_days"], listed["alice"]["models"]) == (10, ["tiny-llama"])
    assert listed["alice"]["active_weeks"] == 1 and listed["dave"]["last_completion_at"] is None
    page = await admin.ok("GET", f"/v1/admin/users/{bob}")
    assert (page["name"], page["engagement"], page["allowance_used"], page["keys"]) == ("bob", "cooling", 0, [])
    assert page["monthly_allowance"] == 5_000_000 and page["allowance_is_default"] is True
    assert datetime.fromisoformat(page["last_completion_at"]) < now - timedelta(days=9)


async def test_suspend_and_restore_a_user_and_the_401_of_its_key(admin):
    alice = await admin.user("alice")
    _, key = await admin.key_of(alice)
    suspended = await admin.ok("POST", f"/v1/admin/users/{alice}/suspend")
    assert (suspended["id"], suspended["standing"]) == (alice, "suspended")
    assert_error(await admin.completion(key), 401, "account_suspended")
    assert (await admin.ok("POST", f"/v1/admin/users/{alice}/restore", {}))["standing"] == "active"
    assert (await admin.completion(key)).status_code == 200


async def test_allowance_as_a_number_a_text_and_the_default(admin):
    alice = await admin.user("alice")
    set_to = await admin.ok("POST", f"/v1/admin/users/{alice}/allowance", {"tokens": "100K"})
    assert (set_to["monthly_allowance"], set_to["allowance_is_default"]) == (100_000, False)
    assert (await admin.ok("GET", f"/v1/admin/users/{alice}"))["monthly_allowance"] == 100_000
    assert (await admin.ok("POST", f"/v1/admin/users/{alice}/allowance", {"tokens": 0}))["monthly_allowance"] == 0
    back = await admin.ok("POST", f"/v1/admin/users/{alice}/allowance", {"tokens": None})
    assert (back["monthly_allowance"], back["allowance_is_default"]) == (5_000_000, True)
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/allowance", {"tokens": -5}), 400,
                 "invalid_request", param="tokens", message="Tokens must be from 0 to 1000000000000000, not -5.")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/allowance", {"tokens": "lots"}), 400,
                 "invalid_request", param="tokens")


async def test_tags_in_their_one_form_a_list_by_tag_and_removal(admin):
    alice, bob = await admin.user("alice"), await admin.user("bob")
    added = await admin.ok("POST", f"/v1/admin/users/{alice}/tags", {"tag": "  Hiring 2026 08 "})
    assert added["tags"] == ["hiring-2026-08"]
    await admin.ok("POST", f"/v1/admin/users/{alice}/tags", {"tag": "hiring-2026-08"})  # there already: once
    assert (await admin.ok("POST", f"/v1/admin/users/{alice}/tags", {"tag": "beta"}))["tags"] == [
        "beta", "hiring-2026-08"]
    await admin.ok("POST", f"/v1/admin/users/{bob}/tags", {"tag": "beta"})
    tagged = await admin.ok("GET", "/v1/admin/users", params={"tag": "Hiring 2026 08"})
    assert [u["name"] for u in tagged["users"]] == ["alice"]
    assert sorted(u["name"] for u in (await admin.ok("GET", "/v1/admin/users?tag=beta"))["users"]) == [
        "alice", "bob"]
    removed = await admin.ok("DELETE", f"/v1/admin/users/{alice}/tags/hiring-2026-08")
    assert removed["tags"] == ["beta"]
    assert_error(await admin.call("DELETE", f"/v1/admin/users/{alice}/tags/hiring-2026-08"), 404, None,
                 message="'alice' has no tag 'hiring-2026-08'.")
    for wrong in ("été", "a" * 33, "no!"):
        assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/tags", {"tag": wrong}), 400,
                     "invalid_request", param="tag", message=re.compile("lowercase letters, digits and dashes"))
    assert_error(await admin.call("GET", "/v1/admin/users?tag=no!"), 400, "invalid_request", param="tag")


async def test_roles_are_admin_or_user(admin):
    alice = await admin.user("alice")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/role", {"role": "owner"}), 400,
                 "invalid_request", param="role", message="Invalid value for 'role': expected admin or user.")
    assert_error(await admin.call("POST", "/v1/admin/users", {"name": "alice"}), 400, "invalid_request",
                 param="name", message="A user named 'alice' exists already.")


# Grants, Budgets and keys ------------------------------------------------------------------------
@pytest.mark.postgres
async def test_grants_to_a_user_and_to_a_keys_own_budget(admin):
    alice, bob = await admin.user("alice"), await admin.user("bob")
    laptop, _ = await admin.key_of(alice)
    bobs, _ = await admin.key_of(bob)
    granted = await admin.ok("POST", f"/v1/admin/users/{alice}/grants", {"tokens": "2.5M", "note": "approved"})
    assert granted == {"user": {"id": alice, "name": "alice"}, "key": None, "budget_left": 2_500_000}
    own = await admin.ok("POST", f"/v1/admin/users/{alice}/grants", {"tokens": 500, "key_id": laptop})
    assert (own["key"], own["budget_left"]) == ({"id": laptop, "name": "laptop"}, 500)
    keys = (await admin.ok("GET", f"/v1/admin/users/{alice}/keys"))["keys"]
    assert [(k["id"], k["budget_left"]) for k in keys] == [(laptop, 500)]
    assert (await admin.ok("GET", f"/v1/admin/users/{alice}"))["budget_left"] == 2_500_000
    set_to = await admin.ok("POST", f"/v1/admin/users/{alice}/budget", {"tokens": 10})
    assert set_to["budget_left"] == 10
    assert (await admin.ok("POST", f"/v1/admin/users/{alice}/budget", {"tokens": 0, "key_id": laptop}))[
        "budget_left"] == 0
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/grants", {"tokens": 10, "key_id": bobs}), 404,
                 None, message=f"'alice' has no API key with the id {bobs}.")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/grants", {"tokens": 0}), 400,
                 "invalid_request", param="tokens", message="Tokens must be from 1 to 1000000000000000, not 0.")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/grants", {"tokens": 1, "note": "n" * 201}),
                 400, "invalid_request", param="note", message=re.compile("at most 200 characters"))
    await admin.ok("POST", f"/v1/admin/users/{alice}/keys/{laptop}/revoke")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/grants", {"tokens": 1, "key_id": laptop}),
                 400, "invalid_request", message="The key 'laptop' is revoked: it can spend nothing.")


async def test_a_users_keys_pause_resume_revoke(admin):
    alice, bob = await admin.user("alice"), await admin.user("bob")
    laptop, raw = await admin.key_of(alice)
    bobs, _ = await admin.key_of(bob)
    assert raw.startswith("sk-acs-") and (await admin.completion(raw)).status_code == 200
    paused = await admin.ok("POST", f"/v1/admin/users/{alice}/keys/{laptop}/pause")
    assert (paused["key"]["status"], paused["user"]["name"]) == ("paused", "alice") and raw not in str(paused)
    assert_error(await admin.completion(raw), 401, "key_disabled")
    assert (await admin.ok("POST", f"/v1/admin/users/{alice}/keys/{laptop}/resume"))["key"]["status"] == "active"
    assert (await admin.completion(raw)).status_code == 200
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/keys/{bobs}/pause"), 404, None,
                 message=f"'alice' has no API key with the id {bobs}.")
    await admin.ok("POST", f"/v1/admin/users/{alice}/keys/{laptop}/revoke")
    assert_error(await admin.completion(raw), 401, "key_revoked")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/keys/{laptop}/resume"), 400,
                 "invalid_request", message="A revoked key stays revoked: make a new key.")
    assert (await admin.ok("GET", f"/v1/admin/users/{alice}/keys"))["keys"] == []
    everything = (await admin.ok("GET", f"/v1/admin/users/{alice}/keys?all=true"))["keys"]
    assert [(k["id"], k["status"]) for k in everything] == [(laptop, "revoked")]
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/keys", {"name": " "}), 400, "invalid_request",
                 param="name", message="A key needs a name of 1 to 32 characters.")


async def test_a_users_usage_by_day_and_its_running_holds(admin):
    alice = await admin.user("alice")
    laptop, _ = await admin.key_of(alice)
    ci, _ = await admin.key_of(alice, "ci")
    await admin.spent(alice, laptop, 10, datetime.fromisoformat("2026-01-05T09:00:00+00:00"))
    await admin.spent(alice, ci, 4, datetime.fromisoformat("2026-01-07T09:00:00+00:00"), status=UsageStatus.stopped)
    report = await admin.ok("GET", f"/v1/admin/users/{alice}/usage?from=2026-01-01&to=2026-01-31")
    assert (report["from"], report["to"], report["key"]) == ("2026-01-01", "2026-01-31", None)
    assert [(d["day"], d["tokens"]) for d in report["days"]] == [("2026-01-05", 10), ("2026-01-07", 4)]
    assert report["total"] == {"completions": 2, "tokens": 14, "completed": 1, "failed": 0, "stopped": 1}
    only_ci = await admin.ok("GET", f"/v1/admin/users/{alice}/usage",
                             params={"from": "2026-01-01", "to": "2026-01-31", "key_id": ci})
    assert only_ci["key"] == {"id": ci, "name": "ci"} and only_ci["total"]["tokens"] == 4
    assert_error(await admin.call("GET", f"/v1/admin/users/{alice}/usage?from=2026-02-01&to=2026-01-31"), 400,
                 "invalid_request", message="The first day 2026-02-01 comes after the last day 2026-01-31.")
    assert_error(await admin.call("GET", f"/v1/admin/users/{alice}/usage?from=Jan"), 400, "invalid_request",
                 param="from", message="'Jan' is not a day: write it as YYYY-MM-DD.")


# The spend ------------------------------------------------------------------------------------
@pytest.mark.postgres
@pytest.mark.settings(spend_pause_usd=1234.5)
async def test_spend_lock_and_clear_record_the_admin_and_pause_new_gpu_work(admin):
    before = await admin.ok("GET", "/v1/admin/spend")
    assert (before["locked"], before["pause_usd"], before["changes"]) == (False, 1234.5, [])
    locked = await admin.ok("POST", "/v1/admin/spend/lock", {"reason": "GPU bill over plan"})
    assert (locked["locked"], locked["reason"]) == (True, "GPU bill over plan")
    assert [(c["kind"], c["by"], c["reason"]) for c in locked["changes"]] == [
        ("lock", ADMIN_NAME, "GPU bill over plan")]
    assert_error(await admin.completion(admin.stack.key), 429, "spend_cap", headers={"Retry-After": "3600"})
    cleared = await admin.ok("POST", "/v1/admin/spend/clear")
    assert (cleared["locked"], cleared["reason"]) == (False, None)
    assert [(c["kind"], c["by"]) for c in cleared["changes"]] == [("clear", ADMIN_NAME), ("lock", ADMIN_NAME)]
    assert await admin.ok("GET", "/v1/admin/spend") == cleared
    assert_error(await admin.call("POST", "/v1/admin/spend/lock", {"reason": "r" * 201}), 400, "invalid_request",
                 param="reason", message=re.compile("at most 200 characters"))


@pytest.mark.postgres
async def test_spend_figures_of_the_last_24_hours_by_model(admin):
    now = utcnow()
    samples = [Sample("llama-8b", 2, 1, L40S_HOUR, 3600), Sample("llama-405b", 1, 8, 4.54, 1800)]
    async with admin.stack.services.ledger.write_sessions() as session:
        await record_samples(session, samples, now - timedelta(minutes=5))
        await record_samples(session, [Sample("llama-8b", 1, 1, L40S_HOUR, 3600)], now - timedelta(hours=30))
    page = await admin.ok("GET", "/v1/admin/spend")
    assert page["last_24h_usd"] == round(2 * L40S_HOUR + 8 * 4.54 / 2, 2) == page["counted_since_clear_usd"]
    assert page["by_model"] == [{"model": "llama-405b", "usd": 18.16, "gpu_hours": 4.0},
                                {"model": "llama-8b", "usd": 3.9, "gpu_hours": 2.0}]
    assert abs(datetime.fromisoformat(page["last_counted_at"]) - (now - timedelta(minutes=5))) < timedelta(seconds=1)
    assert page["pause_usd"] == 3000.0
    cleared = await admin.ok("POST", "/v1/admin/spend/clear")
    assert cleared["last_24h_usd"] == page["last_24h_usd"] and cleared["counted_since_clear_usd"] == 0


# Warm windows -------------------------------------------------------------------------------------
@pytest.mark.postgres
async def test_a_weekly_window_its_cost_a_week_and_its_removal(admin):
    priced(admin.stack)
    made = await admin.ok("POST", "/v1/admin/warm-windows", {"model": "llama-8b", "days": "mon-fri",
                                                             "from": "09:00", "to": "17:00"})
    assert {k: made[k] for k in ("model", "kind", "days", "from", "to", "time_zone", "hours_per_week",
                                 "usd_per_week", "created_by")} == {
        "model": "tiny-llama", "kind": "weekly", "days": [1, 2, 3, 4, 5], "from": "09:00", "to": "17:00",
        "time_zone": "UTC", "hours_per_week": 40.0, "usd_per_week": round(40 * L40S_HOUR, 2),
        "created_by": ADMIN_NAME}
    night = await admin.ok("POST", "/v1/admin/warm-windows", {"model": "tiny-llama", "days": ["sat", 7],
                                                              "from": "22:00", "to": "02:00",
                                                              "time_zone": "Europe/Berlin"})
    assert (night["hours_per_week"], night["time_zone"]) == (8.0, "Europe/Berlin")  # ends the next day
    listed = (await admin.ok("GET", "/v1/admin/warm-windows"))["windows"]
    assert [w["id"] for w in listed] == [made["id"], night["id"]]
    assert [w["id"] for w in (await admin.ok("GET", "/v1/admin/warm-windows?model=llama-8b"))["windows"]] == [
        made["id"], night["id"]]
    removed = await admin.ok("DELETE", f"/v1/admin/warm-windows/{made['id']}")
    assert (removed["id"], removed["usd_per_week"]) == (made["id"], made["usd_per_week"])
    assert [w["id"] for w in (await admin.ok("GET", "/v1/admin/warm-windows"))["windows"]] == [night["id"]]
    assert_error(await admin.call("DELETE", f"/v1/admin/warm-windows/{made['id']}"), 404, None,
                 message=f"No warm window has the id {made['id']}.")


async def test_warm_now_is_on_at_once_and_costs_its_hours(admin):
    priced(admin.stack)
    now = await admin.ok("POST", "/v1/admin/warm-windows/now", {"model": "llama-8b", "hours": 3})
    assert (now["kind"], now["on_now"], now["hours"], now["usd"]) == ("warm_now", True, 3.0, round(3 * L40S_HOUR, 2))
    assert now["next_7_days_usd"] == now["usd"] and now["created_by"] == ADMIN_NAME
    ends = datetime.fromisoformat(now["ends_at"]) - datetime.fromisoformat(now["starts_at"])
    assert ends == timedelta(hours=3)
    for hours in (0, 25):
        assert_error(await admin.call("POST", "/v1/admin/warm-windows/now", {"model": "llama-8b", "hours": hours}),
                     400, "invalid_request", param="hours",
                     message=f"Warm now lasts a whole number of hours from 1 to 24, not {hours}.")
    assert_error(await admin.call("POST", "/v1/admin/warm-windows/now", {"model": "llama-8b", "hours": "3"}), 400,
                 "invalid_request", param="hours")


async def test_window_refusals_name_their_field(admin):
    window = {"model": "llama-8b", "days": "mon", "from": "09:00", "to": "17:00"}

    async def refused(change: dict, param: str, code: str = "invalid_request") -> dict:
        return assert_error(await admin.call("POST", "/v1/admin/warm-windows", {**window, **change}), 400, code,
                            param=param)

    await refused({"model": "gpt-4"}, "model", "model_not_found")
    await refused({"days": "someday"}, "days")
    await refused({"days": []}, "days")
    await refused({"days": 3}, "days")
    await refused({"from": "9am"}, "from")
    await refused({"to": "24:00"}, "to")
    assert (await refused({"time_zone": "Mars/Olympus"}, "time_zone"))["message"] == (
        "The time zone 'Mars/Olympus' is not one of the IANA time zones, such as UTC or Europe/Berlin.")
    await refused({"floor": 1}, "floor")
    assert_error(await admin.call("DELETE", "/v1/admin/warm-windows/nope"), 400, "invalid_request",
                 param="window_id")


# Analytics -----------------------------------------------------------------------------------------
@pytest.mark.postgres
async def test_analytics_users_tab(admin):
    alice, bob, _ = [await admin.user(name) for name in ("alice", "bob", "carol")]
    now = utcnow()
    await admin.spent(alice, None, 10, now + timedelta(minutes=1))  # within 24 hours of joining
    await admin.spent(bob, None, 10, now - timedelta(days=9))       # cooling (a Completion dated back)
    tab = await admin.ok("GET", "/v1/admin/analytics/users")
    today = now.date().isoformat()
    assert (tab["from"], tab["to"]) == (now.date().replace(day=1).isoformat(), today)
    # The stack's own User and these three; the admin is left out.
    assert (tab["users"], tab["new_users"], tab["active_last_7_days"]) == (4, 4, 1)
    assert tab["new_users_active_within_24h"] == 1
    assert tab["engagement"] == {"active": 1, "cooling": 1, "churned": 0, "not_activated": 2}
    assert tab["new_users_per_day"] == [{"day": today, "new_users": 4}]
    assert (await admin.ok("GET", "/v1/admin/analytics/users?from=2020-01-01&to=2020-01-31"))["new_users"] == 0


@pytest.mark.postgres
async def test_analytics_budget_tab(admin):
    alice, bob, carol = [await admin.user(name) for name in ("alice", "bob", "carol")]
    for who, allowance in ((alice, 100), (bob, 100), (carol, 1000)):
        await admin.ok("POST", f"/v1/admin/users/{who}/allowance", {"tokens": allowance})
    now = utcnow()
    await admin.spent(alice, None, 100, now)
    await admin.spent(bob, None, 95, now)
    await admin.spent(carol, None, 10, now)
    # A Completion that alice's tokens cannot hold: a 429, counted as a refused request.
    _, alices_key = await admin.key_of(alice)
    assert (await admin.completion(alices_key)).status_code == 429
    tab = await admin.ok("GET", "/v1/admin/analytics/budget")
    assert (tab["at_allowance"], tab["near_allowance"], tab["refused_requests"]) == (1, 1, 1)
    closest = [(line["user"]["name"], line["allowance_used"], line["share_used"]) for line in tab["closest"]]
    assert closest == [("alice", 100, 1.0), ("bob", 95, 0.95), ("carol", 10, 0.01)]
    assert tab["closest"][0]["runs_out_on"] == now.date().isoformat()


@pytest.mark.postgres
async def test_analytics_platform_and_usage_tabs(admin):
    alice, bob = await admin.user("alice"), await admin.user("bob")
    laptop, _ = await admin.key_of(alice)
    day = datetime.fromisoformat("2026-01-05T10:00:00+00:00")
    await admin.spent(alice, laptop, 10, day)
    await admin.spent(alice, laptop, 5, day + timedelta(minutes=1), source=UsageSource.job,
                      status=UsageStatus.failed)
    await admin.spent(bob, None, 7, day + timedelta(days=1), model="other-model", source=UsageSource.loom)
    async with admin.stack.services.ledger.write_sessions() as session:
        await record_samples(session, [Sample("llama-8b", 1, 1, 2.0, 3600)], day)
    days = "from=2026-01-01&to=2026-01-31"
    platform = await admin.ok("GET", f"/v1/admin/analytics/platform?{days}")
    assert platform["days"] == [{"day": "2026-01-05", "completed": 1, "failed": 1, "stopped": 0},
                                {"day": "2026-01-06", "completed": 1, "failed": 0, "stopped": 0}]
    assert platform["by_source"] == [{"name": "api", "completions": 1, "tokens": 10},
                                     {"name": "loom", "completions": 1, "tokens": 7},
                                     {"name": "job", "completions": 1, "tokens": 5}]
    assert platform["by_model"] == [{"name": "tiny-llama", "completions": 2, "tokens": 15},
                                    {"name": "other-model", "completions": 1, "tokens": 7}]
    assert platform["spend_by_day"] == [{"day": "2026-01-05", "usd": 2.0}]
    assert platform["spend_by_model"] == [{"model": "llama-8b", "usd": 2.0}]
    await admin.ok("POST", f"/v1/admin/users/{alice}/grants", {"tokens": 50, "note": "approved"})
    usage = await admin.ok("GET", f"/v1/admin/analytics/usage?{days}")
    assert usage["by_user"] == [{"name": "alice", "completions": 2, "tokens": 15},
                                {"name": "bob", "completions": 1, "tokens": 7}]
    newest = usage["newest_completions"]
    assert [(c["user"], c["model"], c["source"], c["tokens"], c["status"]) for c in newest] == [
        ("bob", "other-model", "loom", 7, "completed"), ("alice", "tiny-llama", "job", 5, "failed"),
        ("alice", "tiny-llama", "api", 10, "completed")]
    assert newest[0]["duration_s"] == 1.0 and newest[0]["counted"] == "reported" and newest[0]["key_name"] is None
    assert usage["newest_budget_changes"] == []  # the Grant is of today, not of January
    today = await admin.ok("GET", "/v1/admin/analytics/usage")
    assert [(c["user"], c["tokens"], c["note"]) for c in today["newest_budget_changes"]] == [("alice", 50, "approved")]
    only_bob = await admin.ok("GET", f"/v1/admin/analytics/usage?{days}&user_id={bob}")
    assert [share["name"] for share in only_bob["by_user"]] == ["bob"]
    only_model = await admin.ok("GET", f"/v1/admin/analytics/usage?{days}&model=llama-8b")  # an alias
    assert only_model["by_model"] == [{"name": "tiny-llama", "completions": 2, "tokens": 15}]


async def test_analytics_days_are_checked(admin):
    assert_error(await admin.call("GET", "/v1/admin/analytics/platform?from=2025-01-01&to=2026-03-01"), 400,
                 "invalid_request",
                 message="Usage counts at most 366 days at a time; 2025-01-01 to 2026-03-01 is more.")
    assert_error(await admin.call("GET", "/v1/admin/analytics/users?to=2020-01-01"), 400, "invalid_request")
    assert_error(await admin.call("GET", "/v1/admin/analytics/budget?user_id=x"), 400, "invalid_request",
                 param="user_id")
    assert_error(await admin.call("GET", "/v1/admin/analytics/usage?model=gpt-4"), 400, "model_not_found")


# One service layer -----------------------------------------------------------------------------------
async def test_the_command_line_prints_the_documents_the_routes_answer(admin, capsys):
    alice = await admin.user("alice")
    await admin.ok("POST", f"/v1/admin/users/{alice}/tags", {"tag": "beta"})
    priced(admin.stack)
    await admin.ok("POST", "/v1/admin/warm-windows", {"model": "tiny-llama", "days": "mon", "from": "09:00",
                                                      "to": "10:00"})
    await admin.ok("POST", "/v1/admin/spend/lock", {"reason": "checking"})
    floors = {model: spec.autoscaling.min_replicas for model, spec in admin.stack.services.catalog.models.items()}
    config = cli.AdminConfig(database_url=admin.url, replica_hour_usd={"tiny-llama": L40S_HOUR}, floors=floors)
    await admin.key_of(alice)
    for argv, route in ((["user", "list"], "/v1/admin/users"), (["spend", "show"], "/v1/admin/spend"),
                        (["warm", "list"], "/v1/admin/warm-windows"),
                        (["key", "list", "--user", alice], f"/v1/admin/users/{alice}/keys"),
                        (["usage", alice], f"/v1/admin/users/{alice}/usage")):
        capsys.readouterr()
        assert run_in_thread(cli.main, [*argv, "--json"], config) == 0
        printed = json.loads(capsys.readouterr().out)
        answered = await admin.ok("GET", route)
        for document in (printed, answered):  # a time relative to now differs by the call's moment
            for window in document.get("windows", []):
                window.pop("on_now"), window.pop("next_7_days_usd")
            for model in document.get("models", []):
                model.pop("next_7_days_usd")
        assert printed == answered
