"""Sign-in providers in the browser (spec: Get access, "Sign in" and "Link or unlink a provider"), against a
real OpenID Connect provider on loopback: oidc-provider-mock, whose authorization page asks for the subject
to sign in as (the test types it, as a person signs in at their provider).

The App here is an application of its own, served under PREFIX with ACS_OIDC_* naming the loopback provider:
the package's App starts without a provider, and an App reads its settings once, when it starts. So this
module's `app` replaces the package's for its tests. The provider's own pages are not the App's: what the
visitor's watch reports of them (their missing security headers) is left out, and so are the App's handled
4xx answers under this module's PREFIX, as conftest leaves them out under its own.
"""
from __future__ import annotations

import re
import uuid
from typing import Any, Iterator

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import App, Mailbox, User
from tests.serve_fixtures import ServeInstance

APP_NAME, PREFIX = "sign-in-providers", "/sign-in-providers"
NAME = "Loopback ID"  # ACS_OIDC_NAME: the button reads "Continue with <its name>"
CONTINUE, SIGN_IN_METHODS = f"Continue with {NAME}", "Sign-in methods"
NOT_VERIFIED = "Verify it at the provider, then try again."
NO_USER = f"No User of ACS Infra has the email address that {NAME} gave."
LAST_WAY = "You cannot unlink your last way to sign in."
HANDLED = re.compile(r"Failed to load resource: the server responded with a status of 4\d\d\b")


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    from oidc_provider_mock import run_server_in_thread

    with run_server_in_thread(require_nonce=True) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture(scope="module")
def app(serve_instance: ServeInstance, mailbox: Mailbox, issuer: str) -> Iterator[App]:
    env = {"ACS_PUBLIC_BASE_URL": serve_instance.root + PREFIX, "ACS_OIDC_NAME": NAME, "ACS_OIDC_ISSUER": issuer,
           "ACS_OIDC_CLIENT_ID": "acs-browser-tests", "ACS_OIDC_CLIENT_SECRET": "not-a-secret"}
    with serve_instance.application("test", APP_NAME, PREFIX, env=env) as base:
        yield App(serve_instance, base.removesuffix("/v1"), mailbox)


def at_provider(issuer: str, email: str, verified: bool = True) -> str:
    """A person at the provider with this email; their subject."""
    subject = f"sub-{uuid.uuid4().hex[:10]}"
    answer = httpx.put(f"{issuer}/users/{subject}", json={"email": email, "email_verified": verified})
    assert answer.status_code == 204, answer.text
    return subject


def approved_without_password(app: App, tag: str) -> User:
    """An approved User who never chose a password: a provider can be their one way in."""
    user = User(app.new_email(tag), f"Test {tag.title()} {uuid.uuid4().hex[:4]}")
    with app.account() as http:
        answer = http.post("/account/applications", json={
            "email": user.email, "name": user.name, "organization": "ACS tests",
            "planned_usage": "Browser tests of the App.", "agree_to_rules": True})
        assert answer.status_code == 201, answer.text
    app.admin("application", "approve", user.email)
    return user


def sign_in_at_provider(page: Any, subject: str) -> None:
    """On the provider's authorization page: type the subject, and Authorize."""
    page.locator('input[name="sub"]').fill(subject)
    page.get_by_role("button", name="Authorize").click()


def check(ui: Any, issuer: str) -> None:
    """ui.check(), less what is not the App's: the provider's pages (their headers, and the stylesheet that
    they load from a CDN, which no test machine reaches), and this App's handled 4xx."""
    def the_apps(error: str) -> bool:
        console = re.match(r"console error \((\S+)\)", error)
        if console and not console.group(1).startswith(ui.app.root):
            return False
        return issuer not in error and not (HANDLED.search(error) and f"{PREFIX}/account/" in error)
    ui.errors = [error for error in ui.errors if the_apps(error)]
    ui.check()


def test_a_user_signs_in_with_the_provider_and_links_unlinks_on_profile(app: App, new_ui: Any, issuer: str):
    user = app.approved_user("provider")
    subject = at_provider(issuer, user.email)
    ui = new_ui()
    page = ui.open("sign-in")
    expect(page.get_by_role("button", name=CONTINUE)).to_be_visible()
    ui.shoot("sign-in")
    page.get_by_role("button", name=CONTINUE).click()
    sign_in_at_provider(page, subject)
    # The first sign-in links the provider; no key yet, so API Keys opens, as after a password's sign-in.
    expect(page).to_have_url(re.compile(rf"{PREFIX}/api-keys$"))
    page = ui.open("profile")
    expect(page.get_by_role("heading", name=SIGN_IN_METHODS)).to_be_visible()
    expect(page.get_by_text(f"Linked as {user.email}")).to_be_visible()
    ui.shoot("profile-linked")
    # A password is another way in: the provider may go, and be linked again.
    page.get_by_role("button", name=f"Unlink {NAME}").click()
    expect(page.get_by_role("button", name=f"Link {NAME}")).to_be_visible()
    expect(page.get_by_text("Not linked")).to_be_visible()
    page.get_by_role("button", name=f"Link {NAME}").click()
    sign_in_at_provider(page, subject)
    expect(page).to_have_url(re.compile(rf"{PREFIX}/profile$"))
    expect(page.get_by_role("button", name=f"Unlink {NAME}")).to_be_visible()
    check(ui, issuer)


def test_the_last_way_to_sign_in_cannot_be_unlinked(app: App, new_ui: Any, issuer: str):
    user = approved_without_password(app, "oneway")
    ui = new_ui()
    page = ui.open("sign-in")
    page.get_by_role("button", name=CONTINUE).click()
    sign_in_at_provider(page, at_provider(issuer, user.email))
    expect(page).to_have_url(re.compile(rf"{PREFIX}/api-keys$"))
    page = ui.open("profile")
    page.get_by_role("button", name=f"Unlink {NAME}").click()
    expect(page.get_by_role("alert")).to_contain_text(LAST_WAY)
    expect(page.get_by_role("alert")).to_contain_text("Set a password first, with Reset your password on Profile.")
    expect(page.get_by_role("button", name=f"Unlink {NAME}")).to_be_visible()  # still linked
    ui.shoot("profile-last-way")
    check(ui, issuer)


def test_an_unverified_email_and_an_unknown_one_are_refused_with_their_words(app: App, new_ui: Any, issuer: str):
    user = app.approved_user("unverified")
    ui = new_ui()
    page = ui.open("sign-in")
    page.get_by_role("button", name=CONTINUE).click()
    sign_in_at_provider(page, at_provider(issuer, user.email, verified=False))
    expect(page).to_have_url(re.compile(rf"{PREFIX}/sign-in\?"))
    expect(page.get_by_role("alert")).to_contain_text(f"{NAME} has not verified your email address. {NOT_VERIFIED}")
    ui.shoot("sign-in-not-verified")
    # A provider never makes a User: the App says so, and links to the Apply form.
    page.get_by_role("button", name=CONTINUE).click()
    sign_in_at_provider(page, at_provider(issuer, f"nobody-{uuid.uuid4().hex[:8]}@example.org"))
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text(NO_USER)
    ui.shoot("sign-in-no-user")
    alert.get_by_role("link", name="Apply for access").click()
    expect(page).to_have_url(re.compile(rf"{PREFIX}/apply$"))
    expect(page.get_by_role("button", name="Apply for access")).to_be_visible()
    check(ui, issuer)
