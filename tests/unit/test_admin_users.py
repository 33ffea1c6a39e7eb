"""The Users tab's routes (spec: "Manage Users", "Act on many Users at once", "Group Users with tags"): every
column of the list, an admin's Details, and Selected Users' actions with each rule of the guide: Suspend
and Delete leave admins out, your own row and deleted Users are never acted on, each refused User comes
back with a reason and the others change. Through HTTP on the fake stack, as tests/unit/test_admin_routes.py
(whose fixture and helpers these tests share); marked `postgres`: on PostgreSQL too."""
from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest

from ledger.accounts import app_sessions, identities
from ledger.accounts.passwords import hash_password
from ledger.accounts.sign_in import WRONG, user_of_password
from ledger.accounts.tables import Application, ApplicationStatus, User
from ledger.errors import SignInFailed
from ledger.store.coltypes import utcnow
from ledger.tokens.holds import Held, HoldAsk, end_hold, take_hold
from ledger.tokens.tables import UsageSource, UsageStatus
from tests.spec import assert_error
from tests.unit.test_admin_routes import ADMIN_NAME, SOME_ID, admin, admin_pg_url  # noqa: F401  (the fixtures)
from tests.unit.test_admin_routes import pytest_generate_tests  # noqa: F401  (SQLite, and PostgreSQL when marked)

BULK = "/v1/admin/users/bulk"
PASSWORD = "a long enough password"


async def with_account(admin, name: str, *, organization: str | None = None) -> str:
    """A User with an email and a password, and an approved Application answering `organization`."""
    user_id = await admin.user(name)
    async with admin.stack.services.ledger.write_sessions() as session:
        user = await session.get(User, uuid.UUID(user_id))
        assert user is not None
        user.email, user.password_hash = f"{name}@example.org", hash_password(PASSWORD)
        session.add(user)
        if organization is not None:
            session.add(Application(email=user.email, name=name, organization=organization, planned_usage="research",
                                    status=ApplicationStatus.approved, user_id=user.id))
        await session.commit()
    return user_id


async def listed(admin, **params) -> dict[str, dict]:
    return {u["name"]: u for u in (await admin.ok("GET", "/v1/admin/users", params=params))["users"]}


async def root_id(admin) -> str:
    return (await listed(admin))[ADMIN_NAME]["id"]


async def promoted(admin, name: str) -> str:
    user_id = await with_account(admin, name)
    await admin.ok("POST", f"/v1/admin/users/{user_id}/role", {"role": "admin"})
    return user_id


# The list --------------------------------------------------------------------------------------
@pytest.mark.postgres
async def test_the_list_has_every_column_of_the_guide(admin):
    alice = await with_account(admin, "alice", organization="Acme Lab")
    bob = await admin.user("bob")
    now = utcnow()
    key_id, _ = await admin.key_of(alice)
    await admin.key_of(alice, "spare")
    revoked, _ = await admin.key_of(alice, "old")
    await admin.ok("POST", f"/v1/admin/users/{alice}/keys/{revoked}/revoke")
    await admin.ok("POST", f"/v1/admin/users/{alice}/grants", {"tokens": 1000})
    await admin.spent(alice, key_id, 30, now - timedelta(days=1), model="tiny-llama")
    await admin.spent(alice, key_id, 50, now - timedelta(days=2), model="llama-8b")
    await admin.spent(alice, key_id, 7, now - timedelta(days=40), model="tiny-llama")  # not of the last 30 days
    users = await listed(admin)
    row = users["alice"]
    assert (row["email"], row["organization"], row["application_organization"]) == (
        "alice@example.org", "Acme Lab", "Acme Lab")
    assert (row["role"], row["standing"], row["engagement"], row["deleted_at"]) == ("user", "active", "active", None)
    assert (row["tokens_last_30_days"], row["models"]) == (80, ["llama-8b", "tiny-llama"])
    assert row["active_weeks"] in (2, 3)  # the days 1, 2 and 40 ago: 2 or 3 UTC weeks by the weekday of today
    assert (row["api_keys"], row["budget_left"], row["monthly_allowance"]) == (2, 1000, 5_000_000)
    assert row["created_at"] and row["last_completion_at"] and row["id"] == alice
    assert (users["bob"]["email"], users["bob"]["organization"], users["bob"]["api_keys"],
            users["bob"]["budget_left"], users["bob"]["engagement"]) == (None, None, 0, 0, "not_activated")
    assert users[ADMIN_NAME]["id"] != bob


async def test_a_completion_refused_before_its_first_token_counts_for_none(admin):
    alice = await admin.user("alice")
    ask = HoldAsk(user_id=uuid.UUID(alice), key_id=None, model="tiny-llama", prompt_tokens=0, choices=1, max_tokens=5,
                  may_lower=False, source=UsageSource.api)
    async with admin.stack.services.ledger.write_sessions() as session:
        held = await take_hold(session, ask, now=utcnow())
    assert isinstance(held, Held)
    async with admin.stack.services.ledger.write_sessions() as session:  # released: Inference refused it
        await end_hold(session, held.hold_id, used=None, counting=None, status=UsageStatus.failed)
    row = (await listed(admin))["alice"]
    assert (row["engagement"], row["active_weeks"], row["last_completion_at"], row["tokens_last_30_days"]) == (
        "not_activated", 0, None, 0)


# Details ---------------------------------------------------------------------------------------
@pytest.mark.postgres
async def test_a_typed_organization_replaces_the_applications_until_cleared(admin):
    alice = await with_account(admin, "alice", organization="Acme Lab")
    saved = await admin.ok("POST", f"/v1/admin/users/{alice}/details",
                           {"organization": "  Acme Research  ", "discord_handle": " alice.acme "})
    assert (saved["organization"], saved["typed_organization"], saved["discord_handle"]) == (
        "Acme Research", "Acme Research", "alice.acme")
    assert (await listed(admin))["alice"]["organization"] == "Acme Research"
    page = await admin.ok("GET", f"/v1/admin/users/{alice}")
    assert (page["organization"], page["application_organization"], page["discord_handle"], page["email"]) == (
        "Acme Research", "Acme Lab", "alice.acme", "alice@example.org")
    kept = await admin.ok("POST", f"/v1/admin/users/{alice}/details", {"organization": ""})
    assert (kept["organization"], kept["typed_organization"], kept["discord_handle"]) == (
        "Acme Lab", None, "alice.acme")  # the Application's answer again; the handle, not given, stays
    cleared = await admin.ok("POST", f"/v1/admin/users/{alice}/details", {"discord_handle": None})
    assert cleared["discord_handle"] is None and cleared["user"]["id"] == alice


async def test_details_are_checked(admin):
    alice = await with_account(admin, "alice")
    path = f"/v1/admin/users/{alice}/details"
    assert_error(await admin.call("POST", path, {"organization": "x" * 201}), 400, "invalid_request",
                 param="organization", message="An organization has at most 200 characters; this one has 201.")
    assert_error(await admin.call("POST", path, {"organization": "Acme", "discord_handle": "d" * 101}), 400,
                 "invalid_request", param="discord_handle",
                 message="A Discord handle has at most 100 characters; this one has 101.")
    assert (await listed(admin))["alice"]["organization"] is None  # the refusal changed neither
    assert_error(await admin.call("POST", path, {"organization": "two\nlines"}), 400, "invalid_request",
                 param="organization", message="An organization is one line, without tabs.")
    assert_error(await admin.call("POST", path, {"organization": 5}), 400, "invalid_request", param="organization")
    assert_error(await admin.call("POST", path, {"notes": "x"}), 400, "invalid_request", param="notes")
    assert_error(await admin.call("POST", f"/v1/admin/users/{SOME_ID}/details", {"organization": "x"}), 404, None)


# Selected Users ----------------------------------------------------------------------------------
@pytest.mark.postgres
async def test_suspend_leaves_out_admins_your_own_row_and_those_suspended_already(admin):
    me = await root_id(admin)
    alice, bob = await with_account(admin, "alice"), await with_account(admin, "bob")
    other_admin = await promoted(admin, "erin")
    _, alice_key = await admin.key_of(alice)
    await admin.ok("POST", f"/v1/admin/users/{bob}/suspend")
    answer = await admin.ok("POST", BULK, {"action": "suspend", "user_ids": [alice, bob, other_admin, me, SOME_ID]})
    assert answer["changed"] == [alice]
    assert answer["refused"] == [
        {"user_id": bob, "name": "bob", "email": "bob@example.org", "reason": "This User is suspended already."},
        {"user_id": other_admin, "name": "erin", "email": "erin@example.org",
         "reason": "Suspend leaves admins out: change an admin from their own row."},
        {"user_id": me, "name": ADMIN_NAME, "email": None,
         "reason": "This is your own account: ask another admin to change it."},
        {"user_id": SOME_ID, "name": None, "email": None, "reason": "No User has this id."}]
    users = await listed(admin)
    assert [users[n]["standing"] for n in ("alice", "bob", "erin", ADMIN_NAME)] == [
        "suspended", "suspended", "active", "active"]
    assert_error(await admin.completion(alice_key), 401, "account_suspended")
    restored = await admin.ok("POST", BULK, {"action": "restore", "user_ids": [alice, other_admin]})
    assert restored["changed"] == [alice]  # Restore does not leave admins out, but suits only the suspended
    assert restored["refused"][0]["reason"] == "This User is not suspended."
    assert (await admin.completion(alice_key)).status_code == 200


async def test_a_suspension_ends_the_app_sessions(admin):
    alice = await with_account(admin, "alice")
    async with admin.stack.services.ledger.write_sessions() as session:
        _, token = await app_sessions.start(session, uuid.UUID(alice), utcnow())
        await session.commit()
    await admin.ok("POST", BULK, {"action": "suspend", "user_ids": [alice]})
    async with admin.stack.services.ledger.write_sessions() as session:
        assert await app_sessions.find(session, token, utcnow()) is None


@pytest.mark.postgres
async def test_add_and_remove_a_tag_in_its_one_form(admin):
    alice, bob, carol = [await admin.user(name) for name in ("alice", "bob", "carol")]
    await admin.ok("POST", f"/v1/admin/users/{bob}/tags", {"tag": "hiring-2026-08"})
    added = await admin.ok("POST", BULK, {"action": "add_tag", "user_ids": [alice, bob], "tag": "Hiring 2026 08"})
    assert added["changed"] == [alice]
    assert [r["reason"] for r in added["refused"]] == ["This User has the tag hiring-2026-08 already."]
    assert sorted(await listed(admin, tag="hiring-2026-08")) == ["alice", "bob"]
    removed = await admin.ok("POST", BULK, {"action": "remove_tag", "user_ids": [alice, carol],
                                            "tag": "hiring-2026-08"})
    assert removed["changed"] == [alice]
    assert [r["reason"] for r in removed["refused"]] == ["This User has no tag hiring-2026-08."]
    assert sorted(await listed(admin, tag="hiring-2026-08")) == ["bob"]
    for wrong in ("été", "a" * 33, "no!"):
        assert_error(await admin.call("POST", BULK, {"action": "add_tag", "user_ids": [alice], "tag": wrong}), 400,
                     "invalid_request", param="tag", message=re.compile("lowercase letters, digits and dashes"))
    assert_error(await admin.call("POST", BULK, {"action": "add_tag", "user_ids": [alice]}), 400, "invalid_request",
                 param="tag")


async def test_set_allowance_to_a_number_and_back_to_the_default(admin):
    me = await root_id(admin)
    alice, erin = await admin.user("alice"), await promoted(admin, "erin")
    answer = await admin.ok("POST", BULK, {"action": "set_allowance", "user_ids": [alice, erin, me],
                                           "tokens": "100K"})
    assert answer["changed"] == [alice, erin] and [r["user_id"] for r in answer["refused"]] == [me]
    users = await listed(admin)
    assert (users["alice"]["monthly_allowance"], users["erin"]["monthly_allowance"]) == (100_000, 100_000)
    await admin.ok("POST", BULK, {"action": "set_allowance", "user_ids": [alice], "tokens": None})
    users = await listed(admin)
    assert (users["alice"]["monthly_allowance"], users["alice"]["allowance_is_default"]) == (5_000_000, True)
    assert_error(await admin.call("POST", BULK, {"action": "set_allowance", "user_ids": [alice], "tokens": -1}),
                 400, "invalid_request", param="tokens")


@pytest.mark.postgres
async def test_delete_keeps_the_rows_and_locks_the_user_out_for_good(admin):
    alice, bob = await with_account(admin, "alice"), await with_account(admin, "bob")
    erin = await promoted(admin, "erin")
    key_id, key = await admin.key_of(alice)
    now = utcnow()
    await admin.spent(alice, key_id, 12, now - timedelta(days=1))
    async with admin.stack.services.ledger.write_sessions() as session:
        _, token = await app_sessions.start(session, uuid.UUID(alice), now)
        await identities.link(session, uuid.UUID(alice), "google", "alice-at-google", "alice@example.org", now)
        await session.commit()
    answer = await admin.ok("POST", BULK, {"action": "delete", "user_ids": [alice, erin]})
    assert answer["changed"] == [alice]
    assert answer["refused"] == [{"user_id": erin, "name": "erin", "email": "erin@example.org",
                                  "reason": "Delete leaves admins out: change an admin from their own row."}]
    row = (await listed(admin))["alice"]
    assert row["deleted_at"] is not None and row["standing"] == "suspended" and row["api_keys"] == 0
    assert row["tokens_last_30_days"] == 12  # the ledger still names them
    assert_error(await admin.completion(key), 401, "key_revoked", message="This API key has been revoked.")
    async with admin.stack.services.ledger.write_sessions() as session:
        assert await app_sessions.find(session, token, utcnow()) is None
        with pytest.raises(SignInFailed, match=WRONG):
            await user_of_password(session, "alice@example.org", PASSWORD)
        assert await identities.of_user(session, uuid.UUID(alice)) == []  # no provider signs them in
    for action, extra in (("restore", {}), ("add_tag", {"tag": "x"}), ("set_allowance", {"tokens": 5}),
                          ("delete", {})):
        again = await admin.ok("POST", BULK, {"action": action, "user_ids": [alice, bob], **extra})
        assert [r for r in again["refused"] if r["user_id"] == alice] == [
            {"user_id": alice, "name": "alice", "email": "alice@example.org",
             "reason": "This User is deleted: a deleted User cannot be changed."}]
    deleted = "alice is deleted: a deleted User cannot be changed."
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/restore"), 400, "invalid_request",
                 message=deleted)
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/details", {"organization": "x"}), 400,
                 "invalid_request", message=deleted)
    assert (await admin.ok("GET", f"/v1/admin/users/{alice}"))["deleted_at"] == row["deleted_at"]


async def test_an_admin_is_deleted_from_their_own_row_never_yourself(admin):
    me, erin = await root_id(admin), await promoted(admin, "erin")
    _, key = await admin.key_of(erin)
    deleted = await admin.ok("POST", f"/v1/admin/users/{erin}/delete")
    assert (deleted["id"], deleted["standing"]) == (erin, "suspended") and deleted["deleted_at"]
    assert_error(await admin.call("GET", "/v1/admin/users", key=key), 401, "key_revoked")
    assert_error(await admin.call("POST", f"/v1/admin/users/{erin}/delete"), 400, "invalid_request",
                 message="erin is deleted: a deleted User cannot be changed.")
    assert_error(await admin.call("POST", f"/v1/admin/users/{me}/delete"), 400, "invalid_request",
                 message="You cannot delete yourself: ask another admin.")
    assert (await listed(admin))[ADMIN_NAME]["deleted_at"] is None


async def test_the_bulk_body_is_read_strictly(admin):
    alice = await admin.user("alice")
    assert_error(await admin.call("POST", BULK, {"action": "promote", "user_ids": [alice]}), 400, "invalid_request",
                 param="action", message=re.compile("one of suspend, restore, add_tag, remove_tag, set_allowance"))
    assert_error(await admin.call("POST", BULK, {"action": "suspend", "user_ids": []}), 400, "invalid_request",
                 param="user_ids", message="Select at least one User.")
    assert_error(await admin.call("POST", BULK, {"action": "suspend", "user_ids": alice}), 400, "invalid_request",
                 param="user_ids")
    assert_error(await admin.call("POST", BULK, {"action": "suspend", "user_ids": ["alice"]}), 400,
                 "invalid_request", param="user_ids")
    assert_error(await admin.call("POST", BULK, {"action": "suspend"}), 400, "invalid_request", param="user_ids")
    assert_error(await admin.call("POST", BULK, {"action": "suspend", "user_ids": [alice], "why": 1}), 400,
                 "invalid_request", param="why")
    twice = await admin.ok("POST", BULK, {"action": "suspend", "user_ids": [alice, alice]})
    assert (twice["changed"], twice["refused"]) == ([alice], [])
