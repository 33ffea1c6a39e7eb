"""The App's API Keys routes (spec: "Use API keys", "Manage your keys", "Revoke a key", Limits "API keys"):
what a signed-in User sees and gets, and what the API then answers their keys."""
from __future__ import annotations

import uuid

import pytest

from ledger.tokens import grants
from ledger.accounts.keys import ACCOUNT_SUSPENDED, KEY_DISABLED, KEY_REVOKED, TOO_MANY_KEYS
from ledger.accounts.tables import Standing, User
from tests.own_account import sign_in
from tests.spec import assert_error

KEY_FIELDS = {"id", "name", "prefix", "status", "tokens_this_month", "budget_left", "last_used_at", "created_at"}


async def test_a_new_key_is_shown_whole_once_then_listed_by_its_prefix(fake_stack):
    account = await sign_in(fake_stack, key_name=None)
    assert await account.ok("GET", "/account/keys") == {"data": [], "max_keys": 10, "has_more_room": True}
    made = await account.ok("POST", "/account/keys", {"name": "  laptop "}, status=201)
    assert set(made) == KEY_FIELDS | {"key"}
    assert made["key"].startswith("sk-acs-") and made["prefix"] == made["key"][:11]
    shown = (made["name"], made["status"], made["tokens_this_month"], made["budget_left"])
    assert shown == ("laptop", "active", 0, None)
    listed = await account.ok("GET", "/account/keys")
    assert listed["data"] == [{k: v for k, v in made.items() if k != "key"}]
    assert "key" not in listed["data"][0]


async def test_the_list_has_active_and_paused_keys_newest_first_and_this_months_tokens(fake_stack):
    account = await sign_in(fake_stack)  # its key "laptop"
    assert (await account.completion()).status_code == 200
    second = await account.ok("POST", "/account/keys", {"name": "cluster"}, status=201)
    third = await account.ok("POST", "/account/keys", {"name": "notebook"}, status=201)
    await account.ok("POST", f"/account/keys/{second['id']}/pause")
    await account.ok("POST", f"/account/keys/{third['id']}/revoke")
    listed = (await account.ok("GET", "/account/keys"))["data"]
    assert [(k["name"], k["status"]) for k in listed] == [("cluster", "paused"), ("laptop", "active")]
    # "The sky is" holds 4 prompt tokens and 2 for max_tokens: the fake engine writes both.
    assert listed[1]["tokens_this_month"] == 6 and listed[1]["last_used_at"] is not None


async def test_a_keys_own_budget_shows_its_tokens_left(fake_stack):
    account = await sign_in(fake_stack)
    key_id = (await account.ok("GET", "/account/keys"))["data"][0]["id"]
    async with fake_stack.services.ledger.write_sessions() as session:
        await grants.grant(session, account.user_id, 1000, key_id=uuid.UUID(key_id))
    assert (await account.completion()).status_code == 200
    assert (await account.ok("GET", "/account/keys"))["data"][0]["budget_left"] == 994


async def test_names_are_unique_whatever_the_case_and_a_revoked_keys_name_is_free(fake_stack):
    account = await sign_in(fake_stack)  # "laptop"
    response = await account.call("POST", "/account/keys", {"name": "LapTop"})
    assert_error(response, 409, "key_name_taken", param="name", message=(
        "You have a key named 'laptop' already. No two of your keys can share a name, whatever the case of "
        "its letters."))
    other = await account.ok("POST", "/account/keys", {"name": "cluster"}, status=201)
    response = await account.call("POST", f"/account/keys/{other['id']}/rename", {"name": "LAPTOP"})
    assert_error(response, 409, "key_name_taken", param="name")
    laptop = next(k for k in (await account.ok("GET", "/account/keys"))["data"] if k["name"] == "laptop")
    await account.ok("POST", f"/account/keys/{laptop['id']}/revoke")
    assert (await account.ok("POST", "/account/keys", {"name": "Laptop"}, status=201))["name"] == "Laptop"
    renamed = await account.ok("POST", f"/account/keys/{other['id']}/rename", {"name": " desk "})
    assert (renamed["id"], renamed["name"]) == (other["id"], "desk")


async def test_a_name_needs_1_to_32_characters(fake_stack):
    account = await sign_in(fake_stack, key_name=None)
    assert_error(await account.call("POST", "/account/keys", {"name": "   "}), 400, "invalid_request", param="name",
                 message="A key needs a name of 1 to 32 characters.")
    assert_error(await account.call("POST", "/account/keys", {"name": "x" * 33}), 400, "invalid_request",
                 param="name", message="A key's name has at most 32 characters; this one has 33.")
    assert (await account.ok("POST", "/account/keys", {"name": "x" * 32}, status=201))["name"] == "x" * 32


async def test_the_body_is_strict(fake_stack):
    account = await sign_in(fake_stack, key_name=None)
    assert_error(await account.call("POST", "/account/keys", {"name": "a", "scope": "all"}), 400,
                 "invalid_request", param="scope", message="Unknown parameter: 'scope'.")
    assert_error(await account.call("POST", "/account/keys", {}), 400, "invalid_request", param="name",
                 message="Missing required parameter: 'name'.")
    assert_error(await account.call("POST", "/account/keys", {"name": 7}), 400, "invalid_request", param="name",
                 message="Invalid type for 'name': expected a string.")
    assert_error(await account.call("POST", "/account/keys/not-an-id/pause"), 400, "invalid_request",
                 param="key_id")
    assert_error(await account.call("GET", "/account/keys?all=true"), 400, "invalid_request", param="all")


async def test_at_10_keys_the_list_has_no_room_and_an_11th_gets_409(fake_stack):
    account = await sign_in(fake_stack)
    for n in range(9):
        await account.ok("POST", "/account/keys", {"name": f"key-{n}"}, status=201)
    listed = await account.ok("GET", "/account/keys")
    assert (len(listed["data"]), listed["has_more_room"]) == (10, False)
    assert_error(await account.call("POST", "/account/keys", {"name": "eleventh"}), 409, "too_many_keys",
                 message=TOO_MANY_KEYS)
    assert TOO_MANY_KEYS == "You have 10 API keys, the most that a User may have. Delete one to make another."
    # A paused key counts; a revoked one does not.
    await account.ok("POST", f"/account/keys/{listed['data'][0]['id']}/pause")
    assert_error(await account.call("POST", "/account/keys", {"name": "eleventh"}), 409, "too_many_keys")
    await account.ok("POST", f"/account/keys/{listed['data'][1]['id']}/revoke")
    assert (await account.ok("GET", "/account/keys"))["has_more_room"] is True
    await account.ok("POST", "/account/keys", {"name": "eleventh"}, status=201)


async def test_pause_then_resume_then_revoke_and_the_v1_answers(fake_stack):
    account = await sign_in(fake_stack)
    key_id = (await account.ok("GET", "/account/keys"))["data"][0]["id"]
    paused = await account.ok("POST", f"/account/keys/{key_id}/pause")
    assert paused["status"] == "paused" and set(paused) == KEY_FIELDS
    assert_error(await account.completion(), 401, "key_disabled", message=KEY_DISABLED)
    assert KEY_DISABLED == "This API key is paused. Resume it on API Keys in the App to use it again."
    assert (await account.ok("POST", f"/account/keys/{key_id}/resume"))["status"] == "active"
    assert (await account.completion()).status_code == 200
    assert (await account.ok("POST", f"/account/keys/{key_id}/revoke"))["status"] == "revoked"
    assert_error(await account.completion(), 401, "key_revoked", message="This API key has been revoked.")
    assert KEY_REVOKED == "This API key has been revoked."
    assert (await account.ok("GET", "/account/keys"))["data"] == []
    # A revoke cannot be undone; a second revoke changes nothing.
    for action in ("resume", "pause"):
        assert_error(await account.call("POST", f"/account/keys/{key_id}/{action}"), 409, "key_revoked",
                     message="This API key has been revoked. Make a new key.")
    assert_error(await account.call("POST", f"/account/keys/{key_id}/rename", {"name": "again"}), 409,
                 "key_revoked")
    assert (await account.ok("POST", f"/account/keys/{key_id}/revoke"))["status"] == "revoked"


async def test_a_suspended_users_keys_get_the_suspension_401(fake_stack):
    account = await sign_in(fake_stack)
    async with fake_stack.services.ledger.write_sessions() as session:
        user = await session.get(User, account.user_id)
        user.standing = Standing.suspended
        await session.commit()
    assert_error(await account.completion(), 401, "account_suspended", message=ACCOUNT_SUSPENDED)


async def test_another_users_key_is_not_found(fake_stack):
    mine, theirs = await sign_in(fake_stack), await sign_in(fake_stack)
    their_key = (await theirs.ok("GET", "/account/keys"))["data"][0]["id"]
    for action in ("pause", "resume", "revoke"):
        assert_error(await mine.call("POST", f"/account/keys/{their_key}/{action}"), 404, "key_not_found",
                     message=f"You have no API key with the id {their_key}.")
    assert_error(await mine.call("POST", f"/account/keys/{their_key}/rename", {"name": "mine"}), 404,
                 "key_not_found")
    assert_error(await mine.call("POST", f"/account/keys/{uuid.uuid4()}/pause"), 404, "key_not_found")
    assert (await theirs.ok("GET", "/account/keys"))["data"][0]["status"] == "active"
    assert (await theirs.completion()).status_code == 200


async def test_the_routes_take_a_session_and_not_an_api_key(fake_stack):
    account = await sign_in(fake_stack)
    response = await fake_stack.http.get("/account/keys", headers={"Authorization": f"Bearer {account.key}"})
    assert_error(response, 401, "session_required")
    assert_error(await fake_stack.http.get("/account/keys"), 401, "session_ended",
                 message="Your session has ended.")


@pytest.mark.postgres
async def test_keys_on_postgres(fake_stack):
    """The 10-key cap and the name rule hold on the ledger's production backend too."""
    account = await sign_in(fake_stack)
    assert_error(await account.call("POST", "/account/keys", {"name": "LAPTOP"}), 409, "key_name_taken")
    for n in range(9):
        await account.ok("POST", "/account/keys", {"name": f"key-{n}"}, status=201)
    assert_error(await account.call("POST", "/account/keys", {"name": "eleventh"}), 409, "too_many_keys")


async def test_a_change_without_the_csrf_token_is_refused(fake_stack):
    account = await sign_in(fake_stack)
    response = await account.browser.http.post("/account/keys", json={"name": "cluster"})
    assert_error(response, 403, "csrf_failed",
                 message="The request lacks the App's CSRF token. Reload the page and try again.")
    assert [k["name"] for k in (await account.ok("GET", "/account/keys"))["data"]] == ["laptop"]
