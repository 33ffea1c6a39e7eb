"""The App's access routes (/account): CSRF, Apply, Invites, sign-in and sign-out, sessions, password links.

Each test's browser comes from an address of its own (tests/account_fixtures.py), and the services'
clock is one the test moves, so that session and link lifetimes are tested without waiting.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.message import EmailMessage
from typing import Any

import pytest
from sqlmodel import select

from ledger.accounts import access_links
from ledger.accounts import app_sessions
from ledger.accounts import applications
from ledger.accounts.tables import Application, ApplicationStatus, AppSession, LinkPurpose
from ledger.accounts.applications import ApplicationForm
from ledger.tokens.grants import standing
from ledger.accounts.keys import ACCOUNT_SUSPENDED, create_api_key
from ledger.accounts.mail import deliver_pending
from ledger.accounts.tables import Role, Standing, User, UserTag
from domain.operations.users import set_standing
from tests.account_fixtures import PASSWORD, browser_client, make_user, signed_in

START = datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc)
DID_NOT_WORK = "The link did not work"
SESSION_ENDED = "Your session has ended."
CSRF_FAILED = "The request lacks the App's CSRF token. Reload the page and try again."
FORM = {"name": "Ada Lovelace", "organization": "Analytical Engines", "planned_usage": "Probing base models.",
        "agree_to_rules": True}


class Clock:
    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class Outbox:
    """A Mailer that keeps what it is handed."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []

    async def send(self, message: EmailMessage) -> None:
        self.messages.append(message)

    def to(self, address: str) -> list[EmailMessage]:
        return [message for message in self.messages if message["To"] == address]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def outbox() -> Outbox:
    return Outbox()


def the_tests_own(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Compose's keywords for the parts that the test asks for: its `clock` is the stack's, so that
    lifetimes move with it; its `outbox` is the stack's mailer. A test that asks for neither gets
    the stack's own."""
    keywords = {"clock": "clock", "outbox": "mailer"}
    return {keyword: request.getfixturevalue(name) for name, keyword in keywords.items()
            if name in request.fixturenames}


@pytest.fixture
def composed(request: pytest.FixtureRequest) -> dict[str, Any]:
    return the_tests_own(request)


def unique_email(tag: str = "ada") -> str:
    import uuid

    return f"{tag}-{uuid.uuid4().hex[:10]}@Example.org"


def error_of(answer: Any, status: int, code: str | None, param: str | None = None) -> dict:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error", "request_id"} and body["request_id"].startswith("req_")
    assert body["error"]["code"] == code and body["error"]["param"] == param
    assert answer.headers["x-request-id"] == body["request_id"]
    return body["error"]


async def link_token(stack: Any, email: str, purpose: LinkPurpose, clock: Clock) -> str:
    """A password link made in the ledger, as an approval or a request for one makes it."""
    async with stack.services.ledger.write_sessions() as session:
        user = await applications.user_by_email(session, email.lower())
        token = await access_links.make_password_link(session, user.id, purpose, clock())
        await session.commit()
    return token


async def user_row(stack: Any, email: str) -> User:
    async with stack.services.sessions() as session:
        return await applications.user_by_email(session, email.lower())


# -- CSRF and the two kinds of credentials ------------------------------------------------------------

async def test_the_csrf_cookie_and_a_refusal_without_the_header(fake_stack):
    browser = await browser_client(fake_stack)
    answer = await browser.get("/account/csrf")
    assert answer.status_code == 204
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("acs_csrf=") and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "HttpOnly" not in cookie and "Secure" not in cookie  # http here; https sets Secure
    for headers in ({}, {"X-CSRF-Token": "not-the-cookie"}):
        refused = await browser.post("/account/sign-in", json={"email": "a@b.org", "password": "x"}, headers=headers)
        assert error_of(refused, 403, "csrf_failed")["message"] == CSRF_FAILED
    signed = await signed_in(fake_stack)
    refused = await signed.http.post("/account/sign-out")
    assert error_of(refused, 403, "csrf_failed")["message"] == CSRF_FAILED
    assert (await signed.get("/account/me")).status_code == 200  # a read needs no token


async def test_cookies_are_secure_over_https(fake_stack):
    browser = await browser_client(fake_stack)
    answer = await browser.get("https://api.test/account/csrf")
    assert "Secure" in answer.headers["set-cookie"]


@pytest.mark.settings(trusted_proxies="10.0.0.0/8")
async def test_only_a_trusted_proxy_says_that_the_request_came_over_https(fake_stack):
    forged = await (await browser_client(fake_stack, address="192.0.2.9")).get(
        "/account/csrf", headers={"X-Forwarded-Proto": "https"})
    assert "Secure" not in forged.headers["set-cookie"]
    vouched = await (await browser_client(fake_stack, address="10.1.2.3")).get(
        "/account/csrf", headers={"X-Forwarded-Proto": "https"})
    assert "Secure" in vouched.headers["set-cookie"]


async def test_an_api_key_is_refused_on_account_routes_and_a_session_on_v1(fake_stack):
    signed = await signed_in(fake_stack)
    refused = await signed.get("/account/me", headers=fake_stack.auth())
    error = error_of(refused, 401, "session_required")
    assert error["message"] == "The App's account routes take a session from sign-in, not an API key."
    assert error_of(await signed.get("/v1/models"), 401, "missing_authorization")  # the cookie counts for nothing
    answer = await signed.post("/v1/completions", json={"model": "tiny-llama", "prompt": "x", "max_tokens": 1})
    assert error_of(answer, 401, "missing_authorization")


async def test_no_session_is_401_session_ended(fake_stack):
    browser = await browser_client(fake_stack)
    assert error_of(await browser.get("/account/me"), 401, "session_ended")["message"] == SESSION_ENDED
    browser.cookies.set("acs_session", "made-up")
    assert error_of(await browser.get("/account/me"), 401, "session_ended")["message"] == SESSION_ENDED


# -- sign-in -----------------------------------------------------------------------------------------------

async def test_sign_in_sets_the_session_cookie_and_answers_me(fake_stack, clock):
    email = unique_email()
    await make_user(fake_stack, email, name=f"Ada {email}")
    browser = await browser_client(fake_stack)
    answer = await browser.post("/account/sign-in", json={"email": f"  {email.upper()} ", "password": PASSWORD},
                                headers={"X-CSRF-Token": browser.cookies["acs_csrf"]})
    assert answer.status_code == 200, answer.text
    cookies = answer.headers.get_list("set-cookie")
    session_cookie = next(cookie for cookie in cookies if cookie.startswith("acs_session="))
    assert "HttpOnly" in session_cookie and "SameSite=lax" in session_cookie and "Path=/" in session_cookie
    assert f"Max-Age={30 * 24 * 3600}" in session_cookie
    assert any(cookie.startswith("acs_csrf=") for cookie in cookies)  # a fresh CSRF token at sign-in
    me = {"id": answer.json()["user"]["id"], "email": email.lower(), "name": f"Ada {email}", "role": "user",
          "has_key": False, "providers": []}
    assert answer.json() == {"user": me, "next": "/api-keys"}
    assert (await browser.get("/account/me")).json() == me


async def test_after_a_key_sign_in_opens_usage(fake_stack):
    user = await make_user(fake_stack, unique_email())
    async with fake_stack.services.ledger.write_sessions() as session:
        await create_api_key(session, user.id, "laptop")
        await session.commit()
    browser = await browser_client(fake_stack)
    answer = await browser.post("/account/sign-in", json={"email": user.email, "password": PASSWORD},
                                headers={"X-CSRF-Token": browser.cookies["acs_csrf"]})
    assert answer.json()["next"] == "/playground" and answer.json()["user"]["has_key"] is True


async def test_a_wrong_password_or_an_unknown_email_is_one_401(fake_stack):
    email = unique_email()
    await make_user(fake_stack, email)
    await make_user(fake_stack, unique_email("nopassword"), password=None)
    browser = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": browser.cookies["acs_csrf"]}
    for tried in ({"email": email, "password": "wrong password"}, {"email": unique_email(), "password": PASSWORD},
                  {"email": "not an email", "password": PASSWORD}):
        answer = await browser.post("/account/sign-in", json=tried, headers=headers)
        assert error_of(answer, 401, "sign_in_failed")["message"] == "The email or password is not right."
        assert "acs_session" not in answer.headers.get("set-cookie", "")


async def test_sign_in_bodies_are_read_strictly(fake_stack):
    browser = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": browser.cookies["acs_csrf"]}
    answer = await browser.post("/account/sign-in", json={"email": "a@b.org", "password": "x", "remember": True},
                                headers=headers)
    assert error_of(answer, 400, "invalid_request", "remember")["message"] == "Unknown parameter: 'remember'."
    answer = await browser.post("/account/sign-in", json={"email": "a@b.org"}, headers=headers)
    assert error_of(answer, 400, "invalid_request", "password")
    answer = await browser.post("/account/sign-in", json={"email": 5, "password": "x"}, headers=headers)
    assert error_of(answer, 400, "invalid_request", "email")


async def test_five_tries_a_minute_then_429_with_retry_after(fake_stack, clock):
    browser = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": browser.cookies["acs_csrf"]}
    wrong = {"email": unique_email(), "password": "wrong password"}
    for _ in range(5):
        assert (await browser.post("/account/sign-in", json=wrong, headers=headers)).status_code == 401
        clock.advance(seconds=2)
    refused = await browser.post("/account/sign-in", json=wrong, headers=headers)
    assert error_of(refused, 429, "too_many_tries")["message"] == "Too many tries to sign in. Wait 50 seconds."
    assert refused.headers["retry-after"] == "50"
    # Other families count apart; another address is not refused at another account (the same account
    # has had its 5 tries too: tests/unit/test_account_access_tries.py).
    links = await browser.post("/account/password-links", json={"email": wrong["email"]}, headers=headers)
    assert links.status_code == 200
    other = await browser_client(fake_stack)
    assert (await other.post("/account/sign-in", json={**wrong, "email": unique_email()},
                             headers={"X-CSRF-Token": other.cookies["acs_csrf"]})).status_code == 401
    clock.advance(seconds=50)
    assert (await browser.post("/account/sign-in", json=wrong, headers=headers)).status_code == 401


async def test_links_and_passwords_have_the_same_limit(fake_stack, clock, outbox):
    browser = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": browser.cookies["acs_csrf"]}
    for _ in range(5):
        assert (await browser.post("/account/password-links", json={"email": unique_email()},
                                   headers=headers)).status_code == 200
        assert (await browser.post("/account/password", json={"token": "x", "password": "long enough"},
                                   headers=headers)).status_code == 410
    for path, body in (("/account/password-links", {"email": unique_email()}),
                       ("/account/password", {"token": "x", "password": "long enough"})):
        refused = await browser.post(path, json=body, headers=headers)
        assert error_of(refused, 429, "too_many_tries")["message"] == "Too many tries. Wait 60 seconds."
        assert refused.headers["retry-after"] == "60"


async def test_a_suspended_user_gets_403_and_its_sessions_end(fake_stack, clock):
    browser = await signed_in(fake_stack)
    async with fake_stack.services.ledger.write_sessions() as session:
        await set_standing(session, browser.user_id, Standing.suspended)
    error = error_of(await browser.get("/account/me"), 401, "session_ended")
    assert error["message"] == SESSION_ENDED
    async with fake_stack.services.sessions() as session:
        rows = list(await session.exec(select(AppSession).where(AppSession.user_id == browser.user_id)))
    assert rows and all(row.ended_at is not None for row in rows)
    again = await browser.post("/account/sign-in", json={"email": browser.email, "password": PASSWORD})
    assert error_of(again, 403, "account_suspended")["message"] == ACCOUNT_SUSPENDED
    wrong = await browser.post("/account/sign-in", json={"email": browser.email, "password": "not it at all"})
    assert error_of(wrong, 401, "sign_in_failed")  # only the right password learns of the suspension


async def test_sign_out_ends_the_session_and_clears_the_cookie(fake_stack):
    browser = await signed_in(fake_stack)
    token = browser.cookies["acs_session"]
    answer = await browser.post("/account/sign-out")
    assert answer.status_code == 204 and answer.content == b""
    cleared = answer.headers["set-cookie"]
    assert cleared.startswith('acs_session=""') and "Max-Age=0" in cleared
    browser.cookies.set("acs_session", token)  # the old cookie no longer works
    assert error_of(await browser.get("/account/me"), 401, "session_ended")
    assert (await browser.post("/account/sign-out")).status_code == 204  # signed out already: the same answer


# -- sessions in time ---------------------------------------------------------------------------------------

async def test_a_session_lasts_30_days_from_its_last_renewal(fake_stack, clock):
    browser = await signed_in(fake_stack)
    clock.advance(hours=23)
    quiet = await browser.get("/account/me")
    assert quiet.status_code == 200 and "set-cookie" not in quiet.headers  # renewed at most once a day
    clock.advance(hours=2)
    renewed = await browser.get("/account/me")
    assert renewed.status_code == 200
    assert f"Max-Age={30 * 24 * 3600}" in renewed.headers["set-cookie"]
    async with fake_stack.services.sessions() as session:
        row = (await session.exec(select(AppSession).where(AppSession.user_id == browser.user_id))).one()
    assert row.renewed_at == clock.now and row.expires_at == clock.now + timedelta(days=30)
    clock.advance(days=29, hours=23)
    assert (await browser.get("/account/me")).status_code == 200  # renews again
    clock.advance(days=30)
    assert error_of(await browser.get("/account/me"), 401, "session_ended")


async def test_without_a_visit_the_session_ends_after_30_days(fake_stack, clock):
    browser = await signed_in(fake_stack)
    clock.advance(days=30)
    assert error_of(await browser.get("/account/me"), 401, "session_ended")["message"] == SESSION_ENDED


# -- Apply --------------------------------------------------------------------------------------------------

async def test_apply_once_and_the_409_of_a_second_application(fake_stack, clock):
    browser = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": browser.cookies["acs_csrf"]}
    email = unique_email()
    body = {**FORM, "email": f" {email} ", "how_you_heard": "A friend", "expected_tokens": "2M"}
    answer = await browser.post("/account/applications", json=body, headers=headers)
    assert answer.status_code == 201 and answer.json() == {"status": "received"}
    async with fake_stack.services.sessions() as session:
        row = (await session.exec(select(Application).where(Application.email == email.lower()))).one()
    assert row.status == ApplicationStatus.waiting and row.how_you_heard == "A friend" and row.expected_tokens == "2M"
    again = await browser.post("/account/applications", json={**body, "email": email.upper()}, headers=headers)
    assert error_of(again, 409, "application_exists")["message"] == "An application from this email already exists."
    user = await make_user(fake_stack, unique_email())
    taken = await browser.post("/account/applications", json={**FORM, "email": user.email}, headers=headers)
    assert error_of(taken, 409, "application_exists")


async def test_a_rejected_applicant_may_apply_again(fake_stack, clock, outbox):
    email = unique_email().lower()
    async with fake_stack.services.ledger.write_sessions() as session:
        application = await applications.submit(session, email, ApplicationForm("Ada", "Org", "Plans"), clock())
        await applications.reject(session, application, clock(), "http://app.test")
    await deliver_pending(fake_stack.services.ledger.write_sessions, outbox, clock())  # nothing left for others
    assert [message["Subject"] for message in outbox.to(email)] == ["Your ACS Infra application"]
    browser = await browser_client(fake_stack)
    answer = await browser.post("/account/applications", json={**FORM, "email": email},
                                headers={"X-CSRF-Token": browser.cookies["acs_csrf"]})
    assert answer.status_code == 201


@pytest.mark.parametrize("change, param, message", [
    ({"agree_to_rules": False}, "agree_to_rules", "Agree to the platform rules to apply."),
    ({"agree_to_rules": None}, "agree_to_rules", "Agree to the platform rules to apply."),
    ({"email": "ada.example.org"}, "email", "Enter an email address, such as ada@example.org."),
    ({"name": None}, "name", "Missing required parameter: 'name'."),
    ({"name": "   "}, "name", "Fill in name."),
    ({"planned_usage": 5}, "planned_usage", "Invalid type for 'planned_usage': expected a string."),
    ({"links": "x" * 10_001}, "links", "Write at most 10000 characters in links."),
    ({"referrer": "x"}, "referrer", "Unknown parameter: 'referrer'."),
])
async def test_apply_refusals_name_their_field(fake_stack, change, param, message):
    browser = await browser_client(fake_stack)
    body = {key: value for key, value in {**FORM, "email": unique_email(), **change}.items()}
    answer = await browser.post("/account/applications", json=body, headers={"X-CSRF-Token": browser.cookies["acs_csrf"]})
    assert error_of(answer, 400, "invalid_request", param)["message"] == message


# -- Invites ----------------------------------------------------------------------------------------------

async def make_invite(stack: Any, clock: Clock, email: str, tokens: int | None = None, tag: str | None = None) -> str:
    async with stack.services.ledger.write_sessions() as session:
        _, token = await access_links.make_invite(session, email.lower(), clock(), tokens=tokens, tag=tag,
                                                  created_by="admin")
        await session.commit()
    return token


async def test_an_invite_approves_at_once_and_opens_set_password(fake_stack, clock, outbox):
    email = unique_email().lower()
    token = await make_invite(fake_stack, clock, email, tokens=250_000, tag="hiring-2026")
    browser = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": browser.cookies["acs_csrf"]}
    assert (await browser.get(f"/account/invites/{token}")).json() == {"email": email}
    answer = await browser.post(f"/account/invites/{token}", json=FORM, headers=headers)
    assert answer.status_code == 201, answer.text
    password_token = answer.json()["password_token"]
    assert outbox.messages == []  # the page opens the link at once: no mail
    link = await browser.get(f"/account/password-links/{password_token}")
    assert link.json() == {"purpose": "set", "email": email}
    user = await user_row(fake_stack, email)
    async with fake_stack.services.sessions() as session:
        application = (await session.exec(select(Application).where(Application.email == email))).one()
        tags = list(await session.exec(select(UserTag.tag).where(UserTag.user_id == user.id)))
        assert application.status == ApplicationStatus.approved and application.user_id == user.id
        left = await standing(session, user.id)
    assert tags == ["hiring-2026"] and left.budget == 250_000 and user.name.startswith("Ada Lovelace")
    # The invite works once; the set link for 7 days.
    again = await browser.post(f"/account/invites/{token}", json=FORM, headers=headers)
    assert error_of(again, 410, "link_expired")["message"] == DID_NOT_WORK
    assert error_of(await browser.get(f"/account/invites/{token}"), 410, "link_expired")
    clock.advance(days=6, hours=23)
    assert (await browser.get(f"/account/password-links/{password_token}")).status_code == 200


async def test_an_invite_expires_after_7_days(fake_stack, clock):
    token = await make_invite(fake_stack, clock, unique_email())
    browser = await browser_client(fake_stack)
    clock.advance(days=7)
    assert error_of(await browser.get(f"/account/invites/{token}"), 410, "link_expired")["message"] == DID_NOT_WORK
    answer = await browser.post(f"/account/invites/{token}", json=FORM, headers={"X-CSRF-Token": browser.cookies["acs_csrf"]})
    assert error_of(answer, 410, "link_expired")
    assert error_of(await browser.get("/account/invites/unknown-token"), 410, "link_expired")


# -- password links -----------------------------------------------------------------------------------------

@pytest.mark.settings(public_base_url="https://app.example.org/")
async def test_check_your_email_for_every_address(fake_stack, clock, outbox):
    with_password, without = unique_email().lower(), unique_email("new").lower()
    suspended = unique_email("gone").lower()
    await make_user(fake_stack, with_password)
    await make_user(fake_stack, without, password=None)
    gone = await make_user(fake_stack, suspended)
    async with fake_stack.services.ledger.write_sessions() as session:
        await set_standing(session, gone.id, Standing.suspended)
    browser = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": browser.cookies["acs_csrf"]}
    for email in (with_password, without, suspended, unique_email("nobody"), "not an email"):
        answer = await browser.post("/account/password-links", json={"email": email.upper()}, headers=headers)
        assert answer.status_code == 200 and answer.json() == {"message": "Check your email."}
    assert [message["Subject"] for message in outbox.to(with_password)] == ["Reset your password"]
    assert [message["Subject"] for message in outbox.to(without)] == ["Set your password"]
    assert outbox.to(suspended) == []  # a suspended User gets no link; an unknown address none either
    reset = outbox.to(with_password)[0].get_content()
    assert "Choose a new password:\nhttps://app.example.org/reset-password?token=" in reset
    assert "Choose your password:\nhttps://app.example.org/set-password?token=" in outbox.to(without)[0].get_content()


async def test_reset_changes_the_password_and_ends_every_session(fake_stack, clock, outbox):
    first = await signed_in(fake_stack)
    other_device = await browser_client(fake_stack)
    signed = await other_device.post("/account/sign-in", json={"email": first.email, "password": PASSWORD},
                                     headers={"X-CSRF-Token": other_device.cookies["acs_csrf"]})
    assert signed.status_code == 200
    token = await link_token(fake_stack, first.email, LinkPurpose.reset, clock)
    assert (await first.get(f"/account/password-links/{token}")).json() == {"purpose": "reset", "email": first.email}
    short = await first.post("/account/password", json={"token": token, "password": "short"})
    assert error_of(short, 400, "invalid_request", "password")["message"] == "Enter a password of at least 8 characters."
    changed = await first.post("/account/password", json={"token": token, "password": "a new long password"})
    assert changed.status_code == 200 and changed.json() == {"message": "Your password is changed."}
    for browser in (first.http, other_device):
        assert error_of(await browser.get("/account/me"), 401, "session_ended")  # signed out everywhere
    used = await first.post("/account/password", json={"token": token, "password": "another long one"})
    assert error_of(used, 410, "link_expired")["message"] == DID_NOT_WORK
    user = await user_row(fake_stack, first.email)
    assert user.password_hash.startswith("$argon2id$") and "a new long password" not in user.password_hash
    assert user.password_set_at == clock.now
    old = await first.post("/account/sign-in", json={"email": first.email, "password": PASSWORD})
    assert error_of(old, 401, "sign_in_failed")
    new = await first.post("/account/sign-in", json={"email": first.email, "password": "a new long password"})
    assert new.status_code == 200


async def test_set_password_from_the_approval_link(fake_stack, clock):
    email = unique_email()
    await make_user(fake_stack, email, password=None)
    token = await link_token(fake_stack, email, LinkPurpose.approval, clock)
    browser = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": browser.cookies["acs_csrf"]}
    assert (await browser.get(f"/account/password-links/{token}")).json()["purpose"] == "approval"
    answer = await browser.post("/account/password", json={"token": token, "password": "my first password"},
                                headers=headers)
    assert answer.json() == {"message": "Your password is set."}


async def test_only_the_newest_link_works_and_each_expires(fake_stack, clock):
    email = unique_email()
    await make_user(fake_stack, email, password=None)
    approval = await link_token(fake_stack, email, LinkPurpose.approval, clock)
    clock.advance(days=6, hours=23)
    browser = await browser_client(fake_stack)
    assert (await browser.get(f"/account/password-links/{approval}")).status_code == 200
    clock.advance(hours=1)
    assert error_of(await browser.get(f"/account/password-links/{approval}"), 410, "link_expired")  # 7 days
    first = await link_token(fake_stack, email, LinkPurpose.set, clock)
    newest = await link_token(fake_stack, email, LinkPurpose.set, clock)
    assert error_of(await browser.get(f"/account/password-links/{first}"), 410, "link_expired")
    assert (await browser.get(f"/account/password-links/{newest}")).status_code == 200
    clock.advance(minutes=59)
    assert (await browser.get(f"/account/password-links/{newest}")).status_code == 200
    clock.advance(minutes=1)
    answer = await browser.post("/account/password", json={"token": newest, "password": "long enough now"},
                                headers={"X-CSRF-Token": browser.cookies["acs_csrf"]})
    assert error_of(answer, 410, "link_expired")["message"] == DID_NOT_WORK  # 1 hour


async def test_a_suspended_users_link_no_longer_works(fake_stack, clock):
    email = unique_email()
    user = await make_user(fake_stack, email)
    token = await link_token(fake_stack, email, LinkPurpose.reset, clock)
    async with fake_stack.services.ledger.write_sessions() as session:
        await set_standing(session, user.id, Standing.suspended)
    browser = await browser_client(fake_stack)
    assert error_of(await browser.get(f"/account/password-links/{token}"), 410, "link_expired")


# -- the admin routes with an admin's session ------------------------------------------------------------

async def test_an_admins_session_opens_the_admin_routes_with_csrf(fake_stack):
    admin = await signed_in(fake_stack, role=Role.admin)
    assert (await admin.get("/v1/admin/users")).status_code == 200
    made = await admin.post("/v1/admin/users", json={"name": f"made by {admin.email}"})
    assert made.status_code == 200, made.text
    refused = await admin.http.post("/v1/admin/users", json={"name": f"no csrf {admin.email}"})
    assert error_of(refused, 403, "csrf_failed")
    user = await signed_in(fake_stack)
    assert error_of(await user.get("/v1/admin/users"), 403, "admin_only")
    token = admin.cookies["acs_session"]
    await admin.post("/account/sign-out")
    admin.cookies.set("acs_session", token)
    assert error_of(await admin.get("/v1/admin/users"), 401, "session_ended")


async def test_the_ledger_keeps_only_hashes_of_tokens(fake_stack, clock):
    browser = await signed_in(fake_stack)
    async with fake_stack.services.sessions() as session:
        row = (await session.exec(select(AppSession).where(AppSession.user_id == browser.user_id))).one()
    assert row.token_hash == access_links.hash_token(browser.cookies["acs_session"])
    assert browser.cookies["acs_session"] not in row.token_hash
    assert app_sessions.LIFETIME == timedelta(days=30)
