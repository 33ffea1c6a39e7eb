"""The routes of A User's page on Admin that its Users tab does not share (issue 37, spec "Open a User's
page"): the admins' notes on a User, the User's Application with its answers, and their Usage page counted
as GET /account/usage counts it. Through HTTP on the fake stack, with test_admin_routes' admin and ledger;
that module's refusal test covers these routes for a normal User's key and for no key.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from domain.admin.user_notes import EMPTY, TOO_LONG
from ledger.accounts import applications
from ledger.accounts.applications import ApplicationForm
from ledger.accounts.keys import create_user
from ledger.accounts.tables import Role
from ledger.accounts.user_notes import NOTE_MAX
from ledger.store.coltypes import utcnow
from tests.spec import assert_error
from tests.unit.test_admin_routes import ADMIN_NAME, admin, admin_pg_url, pytest_generate_tests  # noqa: F401

SOME_ID = "01a12e70-9370-7a9b-87d6-4c3d2621969e"


async def test_a_note_keeps_its_text_the_admin_who_wrote_it_and_when(admin):
    alice = await admin.user("alice")
    assert await admin.ok("GET", f"/v1/admin/users/{alice}/notes") == {"notes": []}
    before = utcnow()
    first = await admin.ok("POST", f"/v1/admin/users/{alice}/notes", {"text": "  Met at NeurIPS.\n"})
    [note] = first["notes"]
    assert note["text"] == "Met at NeurIPS."  # trimmed
    assert note["author"]["name"] == ADMIN_NAME and note["author"]["email"] is None
    written = datetime.fromisoformat(note["created_at"])
    assert before - timedelta(seconds=1) <= written <= utcnow() + timedelta(seconds=1)
    second = await admin.ok("POST", f"/v1/admin/users/{alice}/notes", {"text": "Asked for 405B access."})
    assert [n["text"] for n in second["notes"]] == ["Asked for 405B access.", "Met at NeurIPS."]  # newest first
    assert await admin.ok("GET", f"/v1/admin/users/{alice}/notes") == second


async def test_a_note_by_another_admin_names_that_admin(admin):
    alice = await admin.user("alice")
    async with admin.stack.services.ledger.write_sessions() as session:
        grace = await create_user(session, "grace")
        grace.role, grace.email = Role.admin, "grace@example.org"
        from ledger.accounts.keys import create_api_key

        _, grace_key = await create_api_key(session, grace.id, "admin")
        await session.commit()
    response = await admin.call("POST", f"/v1/admin/users/{alice}/notes", {"text": "Second opinion."}, key=grace_key)
    assert response.status_code == 200, response.text
    [note] = response.json()["notes"]
    assert note["author"]["name"] == "grace" and note["author"]["email"] == "grace@example.org"


async def test_an_empty_or_too_long_note_is_refused_and_nothing_is_kept(admin):
    alice = await admin.user("alice")
    for body in ({"text": "   \n "}, {"text": ""}):
        assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/notes", body), 400, "invalid_request",
                     param="text", message=EMPTY)
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/notes", {"text": "x" * (NOTE_MAX + 1)}), 400,
                 "invalid_request", param="text", message=TOO_LONG)
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/notes", {}), 400, "invalid_request", param="text")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/notes", {"text": 5}), 400, "invalid_request",
                 param="text")
    assert_error(await admin.call("POST", f"/v1/admin/users/{alice}/notes", {"text": "hi", "pinned": True}), 400,
                 "invalid_request", param="pinned")
    assert (await admin.ok("POST", f"/v1/admin/users/{alice}/notes", {"text": "x" * NOTE_MAX}))["notes"]
    assert len((await admin.ok("GET", f"/v1/admin/users/{alice}/notes"))["notes"]) == 1


async def test_notes_of_a_user_that_does_not_exist_are_not_found(admin):
    for method, body in (("GET", None), ("POST", {"text": "Hello"})):
        assert_error(await admin.call(method, f"/v1/admin/users/{SOME_ID}/notes", body), 404, None)
    assert_error(await admin.call("GET", "/v1/admin/users/not-a-uuid/notes"), 400, "invalid_request",
                 param="user_id")


async def test_delete_a_note_and_only_from_its_own_user(admin):
    alice, bob = await admin.user("alice"), await admin.user("bob")
    kept = (await admin.ok("POST", f"/v1/admin/users/{alice}/notes", {"text": "Keep"}))["notes"][0]["id"]
    gone = (await admin.ok("POST", f"/v1/admin/users/{alice}/notes", {"text": "Drop"}))["notes"][0]["id"]
    # Another User's path does not reach the note, and leaves it.
    assert_error(await admin.call("DELETE", f"/v1/admin/users/{bob}/notes/{gone}"), 404, None)
    left = await admin.ok("DELETE", f"/v1/admin/users/{alice}/notes/{gone}")
    assert [n["id"] for n in left["notes"]] == [kept]
    assert_error(await admin.call("DELETE", f"/v1/admin/users/{alice}/notes/{gone}"), 404, None)
    assert_error(await admin.call("DELETE", f"/v1/admin/users/{alice}/notes/{uuid.uuid4().hex[:5]}"), 400,
                 "invalid_request", param="note_id")


async def test_the_application_that_made_the_user_with_its_answers(admin):
    made = await admin.user("made-by-the-route")
    assert await admin.ok("GET", f"/v1/admin/users/{made}/application") == {"application": None}
    form = ApplicationForm(name="Ada Lovelace", organization="Analytical Engines", planned_usage="Probe 8B.",
                           links="https://example.org/ada")
    async with admin.stack.services.ledger.write_sessions() as session:
        sent = await applications.submit(session, "ada@example.org", form, utcnow())
        user = await applications.approve(session, sent, utcnow(), "https://app.example", decided_by="root")
        user_id = str(user.id)
    found = (await admin.ok("GET", f"/v1/admin/users/{user_id}/application"))["application"]
    assert (found["email"], found["status"], found["decided_by"]) == ("ada@example.org", "approved", "root")
    assert found["answers"] == {"name": "Ada Lovelace", "organization": "Analytical Engines",
                                "planned_usage": "Probe 8B.", "how_you_heard": "", "links": "https://example.org/ada",
                                "expected_tokens": ""}
    assert_error(await admin.call("GET", f"/v1/admin/users/{SOME_ID}/application"), 404, None)


async def test_the_usage_page_counts_as_the_users_own_usage_page(admin):
    alice, bob = await admin.user("alice"), await admin.user("bob")
    laptop, _ = await admin.key_of(alice)
    ci, _ = await admin.key_of(alice, "ci")
    bobs, _ = await admin.key_of(bob)
    await admin.spent(alice, laptop, 10, datetime.fromisoformat("2026-01-05T09:00:00+00:00"))
    await admin.spent(alice, ci, 4, datetime.fromisoformat("2026-01-07T09:00:00+00:00"), model="retired-model")
    await admin.spent(bob, bobs, 99, datetime.fromisoformat("2026-01-07T09:00:00+00:00"))
    days = {"from": "2026-01-01", "to": "2026-01-31"}
    page = await admin.ok("GET", f"/v1/admin/users/{alice}/usage-page", params=days)
    assert (page["from"], page["to"], page["tokens"]["total"], page["completions"]["count"]) == (
        "2026-01-01", "2026-01-31", 14, 2)
    assert {k["name"]: k["output"] for k in page["by_key"]} == {"laptop": 10, "ci": 4}
    assert [(m["model"], m["total"]) for m in page["by_model"]] == [("tiny-llama", 10), ("retired-model", 4)]
    one_model = await admin.ok("GET", f"/v1/admin/users/{alice}/usage-page", params={**days, "model": "retired-model"})
    assert one_model["tokens"]["total"] == 4
    one_key = await admin.ok("GET", f"/v1/admin/users/{alice}/usage-page", params={**days, "key": laptop})
    assert one_key["tokens"]["total"] == 10
    # A named range, as Usage's buttons ask: this month has none of January's tokens.
    assert (await admin.ok("GET", f"/v1/admin/users/{alice}/usage-page?range=today"))["from"] == utcnow().date().isoformat()
    assert_error(await admin.call("GET", f"/v1/admin/users/{alice}/usage-page", params={**days, "key": bobs}), 404,
                 None, message=f"This User has no API key with the id {bobs}.")
    assert_error(await admin.call("GET", f"/v1/admin/users/{alice}/usage-page?range=today&from=2026-01-01"), 400,
                 "invalid_request", param="range")
    assert_error(await admin.call("GET", f"/v1/admin/users/{alice}/usage-page?days=7"), 400, "invalid_request",
                 param="days")
    assert_error(await admin.call("GET", f"/v1/admin/users/{SOME_ID}/usage-page"), 404, None)
