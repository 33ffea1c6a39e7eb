"""The Admin page's Applications, Invites and Token requests routes (spec: "Decide token requests", "Get
access"), called as the App calls them: an admin's session with the CSRF header. Each decision is once; an
approval mails the password link, a rejection the Apply form; an Invite's link comes once, with its tag
written as the App writes tags; a token request's approval for another amount is the Grant that the User
reads on Usage."""
from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from ledger.accounts.tables import Role
from tests.account_fixtures import Browser, browser_client, signed_in
from tests.own_account import OwnAccount, sign_in
from tests.spec import assert_error
from tests.unit.test_account_access import Outbox, outbox  # noqa: F401 - outbox: the fixture

ADMIN_NAME = "Grace Admin"
MISSING_ID = "01a12e70-9370-7a9b-87d6-4c3d2621969e"
APPLY = {"name": "Ada Lovelace", "organization": "Analytical Engines", "planned_usage": "Probing base models.",
         "agree_to_rules": True, "links": "https://example.org/paper"}
ASK = {"tokens": "100M", "models": ["llama-8b"], "project": "Refusal directions",
       "planned_usage": "Activations of 20,000 prompts at 4 Layers."}
ROUTES = [("GET", "/v1/admin/applications"), ("GET", "/v1/admin/applications/{id}"),
          ("POST", "/v1/admin/applications/{id}/approve"), ("POST", "/v1/admin/applications/{id}/reject"),
          ("POST", "/v1/admin/invites"), ("GET", "/v1/admin/token-requests"),
          ("GET", "/v1/admin/token-requests/{id}"), ("POST", "/v1/admin/token-requests/{id}/approve"),
          ("POST", "/v1/admin/token-requests/{id}/reject")]


@pytest.fixture
def composed(outbox: Outbox) -> dict[str, Any]:
    return {"mailer": outbox}


class AdminSession:
    """An admin signed in to the App: its calls carry the session cookie and the CSRF header."""

    def __init__(self, browser: Browser, name: str) -> None:
        self.browser, self.name = browser, name

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        return await self.browser.request(method, path, **({} if body is None else {"json": body}))

    async def ok(self, method: str, path: str, body: Any = None) -> Any:
        response = await self.call(method, path, body)
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture
async def admin(fake_stack) -> AdminSession:
    name = f"{ADMIN_NAME} {uuid.uuid4().hex[:6]}"
    return AdminSession(await signed_in(fake_stack, role=Role.admin, name=name), name)


def _email(tag: str = "ada") -> str:
    return f"{tag}-{uuid.uuid4().hex[:10]}@example.org"


async def _apply(stack: Any, email: str, **changes: Any) -> None:
    browser = await browser_client(stack)
    answer = await browser.post("/account/applications", json={**APPLY, "email": email, **changes},
                                headers={"X-CSRF-Token": browser.cookies["acs_csrf"]})
    assert answer.status_code == 201, answer.text


async def _application(admin: AdminSession, email: str) -> dict[str, Any]:
    [found] = [each for each in (await admin.ok("GET", "/v1/admin/applications"))["applications"]
               if each["email"] == email]
    return found


async def _ask(account: OwnAccount, **changes: Any) -> dict[str, Any]:
    return await account.ok("POST", "/account/token-requests", {**ASK, **changes}, status=201)


# Who may call them ------------------------------------------------------------------------------
@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_only_an_admin_calls_them(fake_stack, method, path):
    path = path.replace("{id}", MISSING_ID)
    user = await signed_in(fake_stack)
    assert_error(await user.request(method, path), 403, "admin_only", message="This route is for admins.")
    assert_error(await fake_stack.http.request(method, path, headers={"Authorization": f"Bearer {fake_stack.key}"}),
                 403, "admin_only")
    assert_error(await fake_stack.http.request(method, path), 401, "missing_authorization")


async def test_an_admin_session_without_the_csrf_header_changes_nothing(fake_stack, admin):
    email = _email()
    await _apply(fake_stack, email)
    waiting = await _application(admin, email)
    refused = await admin.browser.http.post(f"/v1/admin/applications/{waiting['id']}/approve")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
    assert (await _application(admin, email))["status"] == "waiting"


# Applications ----------------------------------------------------------------------------------
async def test_an_application_is_read_with_every_answer(fake_stack, admin):
    email = _email()
    await _apply(fake_stack, email, expected_tokens="2M")
    listed = await _application(admin, email)
    one = await admin.ok("GET", f"/v1/admin/applications/{listed['id']}")
    assert one == listed
    assert {k: one[k] for k in ("email", "name", "organization", "planned_usage", "how_you_heard", "links",
                                "expected_tokens", "status", "note", "user_id", "decided_at", "decided_by")} == {
        "email": email, "name": "Ada Lovelace", "organization": "Analytical Engines",
        "planned_usage": "Probing base models.", "how_you_heard": "", "links": "https://example.org/paper",
        "expected_tokens": "2M", "status": "waiting", "note": "", "user_id": None, "decided_at": None,
        "decided_by": ""}
    assert one["created_at"]


async def test_the_waiting_ones_come_first_and_status_filters(fake_stack, admin):
    decided, waiting = _email("decided"), _email("waiting")
    await _apply(fake_stack, decided)
    await _apply(fake_stack, waiting)
    await admin.ok("POST", f"/v1/admin/applications/{(await _application(admin, decided))['id']}/reject", {})
    statuses = [each["status"] for each in (await admin.ok("GET", "/v1/admin/applications"))["applications"]]
    assert statuses == sorted(statuses, key=lambda status: status != "waiting")
    only = (await admin.ok("GET", "/v1/admin/applications?status=waiting"))["applications"]
    assert {each["status"] for each in only} == {"waiting"} and waiting in {each["email"] for each in only}
    assert decided not in {each["email"] for each in only}
    assert_error(await admin.call("GET", "/v1/admin/applications?status=maybe"), 400, "invalid_request",
                 param="status")
    assert_error(await admin.call("GET", "/v1/admin/applications?state=waiting"), 400, "invalid_request",
                 param="state")


async def test_an_approval_makes_the_user_with_its_tokens_and_mails_the_password_link(fake_stack, admin, outbox):
    email = _email()
    await _apply(fake_stack, email)
    waiting = await _application(admin, email)
    approved = await admin.ok("POST", f"/v1/admin/applications/{waiting['id']}/approve", {"tokens": "2.5M"})
    assert (approved["status"], approved["decided_by"]) == ("approved", admin.name)
    assert approved["user"]["id"] == approved["user_id"] and approved["decided_at"]
    [mail] = outbox.to(email)
    assert mail["Subject"] == "Your ACS Infra application is approved"
    assert "/set-password?token=" in mail.get_content() and "The link works once, for 7 days." in mail.get_content()
    page = await admin.ok("GET", f"/v1/admin/users/{approved['user_id']}")
    assert page["budget_left"] == 2_500_000, page

    again = await admin.call("POST", f"/v1/admin/applications/{waiting['id']}/reject", {"note": "No."})
    assert_error(again, 400, "invalid_request", message=f"The application of {email} is approved already.")
    assert len(outbox.to(email)) == 1


async def test_a_rejection_mails_its_note_and_the_apply_form(fake_stack, admin, outbox):
    email = _email()
    await _apply(fake_stack, email)
    waiting = await _application(admin, email)
    rejected = await admin.ok("POST", f"/v1/admin/applications/{waiting['id']}/reject",
                              {"note": "Tell us more about the project."})
    assert (rejected["status"], rejected["note"], rejected["user_id"]) == (
        "rejected", "Tell us more about the project.", None)
    [mail] = outbox.to(email)
    body = mail.get_content()
    assert "The admin wrote: Tell us more about the project." in body and "/apply" in body
    assert_error(await admin.call("POST", f"/v1/admin/applications/{waiting['id']}/approve", {}), 400,
                 "invalid_request", message=f"The application of {email} is rejected already.")


async def test_an_applications_decision_reads_its_fields_strictly(fake_stack, admin):
    email = _email()
    await _apply(fake_stack, email)
    path = f"/v1/admin/applications/{(await _application(admin, email))['id']}"
    assert_error(await admin.call("POST", f"{path}/approve", {"tokens": "lots"}), 400, "invalid_request",
                 param="tokens")
    assert_error(await admin.call("POST", f"{path}/approve", {"grant": "5M"}), 400, "invalid_request",
                 param="grant")
    assert_error(await admin.call("POST", f"{path}/reject", {"note": "x" * 2001}), 400, "invalid_request",
                 message="A rejection's note has at most 2000 characters; this one has 2001.")
    assert (await admin.ok("GET", path))["status"] == "waiting"
    assert_error(await admin.call("GET", f"/v1/admin/applications/{MISSING_ID}"), 404, None,
                 message=f"No application has the id or email '{MISSING_ID}'.")
    assert_error(await admin.call("POST", f"/v1/admin/applications/{MISSING_ID}/approve", {}), 404, None)
    assert_error(await admin.call("GET", "/v1/admin/applications/ada"), 400, "invalid_request",
                 param="application_id")


# Invites --------------------------------------------------------------------------------------------
async def test_an_invite_has_its_link_once_with_the_tag_as_the_app_writes_it(fake_stack, admin, outbox):
    email = _email("invited")
    made = await admin.ok("POST", "/v1/admin/invites", {"email": email.upper(), "tag": "Hiring 2026 08",
                                                        "tokens": "50K"})
    assert (made["email"], made["tag"], made["tokens"]) == (email, "hiring-2026-08", 50_000)
    assert made["link"].startswith("http") and "/apply?invite=" in made["link"] and made["expires_at"]
    token = made["link"].split("invite=", 1)[1]
    browser = await browser_client(fake_stack)
    assert (await browser.get(f"/account/invites/{token}")).json() == {"email": email}
    assert outbox.to(email) == []  # the admin hands the link over: no mail goes out

    taken = await admin.call("POST", "/v1/admin/invites", {"email": (await signed_in(fake_stack)).email})
    assert_error(taken, 400, "invalid_request", param="email", message=re.compile("has the email .* already"))
    assert_error(await admin.call("POST", "/v1/admin/invites", {"email": "not an address"}), 400,
                 "invalid_request", param="email")
    assert_error(await admin.call("POST", "/v1/admin/invites", {"email": _email(), "tag": "ünïcode!"}), 400,
                 "invalid_request", param="tag")
    assert_error(await admin.call("POST", "/v1/admin/invites", {"email": _email(), "tokens": "0"}), 400,
                 "invalid_request", param="tokens")
    assert_error(await admin.call("POST", "/v1/admin/invites", {"tag": "x"}), 400, "invalid_request", param="email")


async def test_an_invite_without_tag_or_tokens(fake_stack, admin):
    made = await admin.ok("POST", "/v1/admin/invites", {"email": _email(), "tag": "", "tokens": ""})
    assert (made["tag"], made["tokens"]) == (None, None)


# Token requests -----------------------------------------------------------------------------------------
async def test_a_request_is_listed_and_read_with_its_user_and_answers(fake_stack, admin):
    account = await sign_in(fake_stack, key_name=None)
    sent = await _ask(account, results="A paper.")
    [line] = [each for each in (await admin.ok("GET", "/v1/admin/token-requests"))["token_requests"]
              if each["id"] == sent["id"]]
    assert await admin.ok("GET", f"/v1/admin/token-requests/{sent['id']}") == line
    assert line["user"] == {"id": str(account.user_id), "name": line["user"]["name"], "email": account.email}
    assert {k: line[k] for k in ("tokens", "models", "project", "planned_usage", "how_you_got_the_number",
                                 "results", "links", "when_needed", "status", "granted", "decided_by")} == {
        "tokens": 100_000_000, "models": ["tiny-llama"], "project": "Refusal directions",
        "planned_usage": ASK["planned_usage"], "how_you_got_the_number": "", "results": "A paper.", "links": "",
        "when_needed": "", "status": "waiting", "granted": None, "decided_by": ""}
    waiting = (await admin.ok("GET", "/v1/admin/token-requests?status=waiting"))["token_requests"]
    assert sent["id"] in {each["id"] for each in waiting} and {each["status"] for each in waiting} == {"waiting"}
    assert_error(await admin.call("GET", "/v1/admin/token-requests?status=open"), 400, "invalid_request",
                 param="status")


async def test_an_approval_for_another_amount_is_the_grant_the_user_reads(fake_stack, admin):
    account = await sign_in(fake_stack, key_name=None)
    sent = await _ask(account)
    decided = await admin.ok("POST", f"/v1/admin/token-requests/{sent['id']}/approve", {"tokens": "50K"})
    assert (decided["status"], decided["tokens"], decided["granted"], decided["decided_by"]) == (
        "approved", 100_000_000, 50_000, admin.name)
    assert decided["decided_at"]
    [mine] = (await account.ok("GET", "/account/token-requests"))["data"]
    assert (mine["status"], mine["tokens"], mine["granted"]) == ("approved", 100_000_000, 50_000)
    assert (await account.ok("GET", "/account/usage"))["budget"] == {"left": 50_000}

    twice = await admin.call("POST", f"/v1/admin/token-requests/{sent['id']}/reject", {"note": "No."})
    assert_error(twice, 400, "invalid_request", message=f"The token request {sent['id']} is approved already.")
    assert (await account.ok("GET", "/account/usage"))["budget"] == {"left": 50_000}


@pytest.mark.parametrize("tokens, granted", [("2.5M", 2_500_000), ("2500000", 2_500_000), (75_000, 75_000)])
async def test_tokens_to_grant_as_the_app_writes_them(fake_stack, admin, tokens, granted):
    sent = await _ask(await sign_in(fake_stack, key_name=None))
    decided = await admin.ok("POST", f"/v1/admin/token-requests/{sent['id']}/approve", {"tokens": tokens})
    assert decided["granted"] == granted


async def test_a_rejection_has_the_note_the_user_reads(fake_stack, admin):
    account = await sign_in(fake_stack, key_name=None)
    sent = await _ask(account)
    decided = await admin.ok("POST", f"/v1/admin/token-requests/{sent['id']}/reject",
                             {"note": "Write the paper first."})
    assert (decided["status"], decided["note"], decided["granted"]) == ("rejected", "Write the paper first.", None)
    [mine] = (await account.ok("GET", "/account/token-requests"))["data"]
    assert (mine["status"], mine["note"]) == ("rejected", "Write the paper first.")
    assert (await account.ok("GET", "/account/usage"))["budget"] == {"left": 0}
    assert_error(await admin.call("POST", f"/v1/admin/token-requests/{sent['id']}/approve", {"tokens": "1M"}), 400,
                 "invalid_request", message=f"The token request {sent['id']} is rejected already.")
    # A rejection without a note: the note may stay empty.
    second = await _ask(account)
    assert (await admin.ok("POST", f"/v1/admin/token-requests/{second['id']}/reject"))["note"] == ""


async def test_a_requests_decision_reads_its_fields_strictly(fake_stack, admin):
    sent = await _ask(await sign_in(fake_stack, key_name=None))
    path = f"/v1/admin/token-requests/{sent['id']}"
    assert_error(await admin.call("POST", f"{path}/approve", {}), 400, "invalid_request", param="tokens",
                 message="Missing required parameter: 'tokens'.")
    assert_error(await admin.call("POST", f"{path}/approve", {"tokens": "lots"}), 400, "invalid_request",
                 param="tokens")
    assert_error(await admin.call("POST", f"{path}/approve", {"tokens": 0}), 400, "invalid_request", param="tokens")
    assert_error(await admin.call("POST", f"{path}/reject", {"note": "x" * 201}), 400, "invalid_request",
                 message="A rejection's note has at most 200 characters; this one has 201.")
    assert_error(await admin.call("POST", f"{path}/reject", {"reason": "x"}), 400, "invalid_request", param="reason")
    assert (await admin.ok("GET", path))["status"] == "waiting"
    assert_error(await admin.call("GET", f"/v1/admin/token-requests/{MISSING_ID}"), 404, None,
                 message=f"No token request has the id {MISSING_ID}.")
    assert_error(await admin.call("POST", f"/v1/admin/token-requests/{MISSING_ID}/approve", {"tokens": 5}), 404,
                 None)
    assert_error(await admin.call("POST", "/v1/admin/token-requests/seven/reject"), 400, "invalid_request",
                 param="request_id")
