"""Get access, in a real browser, as a new User does ("Get access" in the spec's
docs): apply, the admin's approval by the admin command, the approval mail from
the loopback SMTP server, the password, sign-in; a used link and a new one; the
sign-in limit; a session that a new password ends."""
from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from tests.browser.conftest import APPROVED, PASSWORD, App, UI, User


def heading(ui: UI, words: str) -> None:
    expect(ui.page.get_by_role("heading", name=words, exact=True)).to_be_visible()


def select(ui: UI, words: str) -> None:
    """Select the button or link with these words (the spec says "select" for both)."""
    page = ui.page
    page.get_by_role("button", name=words, exact=True).or_(page.get_by_role("link", name=words, exact=True)).click()


def test_apply_approve_set_the_password_and_sign_in(app: App, new_ui) -> None:
    ui: UI = new_ui()
    page = ui.page
    user = User(app.new_email("apply"), "Ada Applicant")

    # Apply for access: the form, then "Application received".
    ui.open("apply")
    heading(ui, "Apply for access")
    ui.shoot("apply")
    page.get_by_label("Email", exact=True).fill(user.email)
    page.get_by_label("Name", exact=True).fill(user.name)
    page.get_by_label("Organization", exact=True).fill("ACS tests")
    page.get_by_label("Planned usage", exact=True).fill("Read the activations of small models.")
    page.get_by_role("button", name="Apply for access").click()
    # Without the rules agreed, the form says what to fix and keeps what was written.
    expect(page.get_by_text("Agree to the platform rules to apply.")).to_be_visible()
    expect(page.get_by_label("Email", exact=True)).to_have_value(user.email)
    ui.shoot("apply-errors")
    page.get_by_label("I agree to these rules.").check()
    page.get_by_role("button", name="Apply for access").click()
    expect(page.get_by_text("Application received")).to_be_visible()
    ui.shoot("apply-received")

    # The admin approves it from the command line; the approval mail links to the password page.
    app.admin("application", "approve", user.email)
    mail = app.mailbox.wait_for(user.email, APPROVED)
    link = mail.link("Choose your password")
    assert link.startswith(app.url("set-password?token=")), link

    # Set your password: too short, then right.
    page.goto(link)
    heading(ui, "Set your password")
    ui.shoot("set-password")
    page.get_by_label("Password", exact=True).fill("short")
    page.get_by_role("button", name="Set the password").click()
    expect(page.get_by_text("Enter a password of at least 8 characters.")).to_be_visible()
    page.get_by_label("Password", exact=True).fill(user.password)
    page.get_by_role("button", name="Set the password").click()
    expect(page.get_by_text("Your password is set.")).to_be_visible()
    ui.shoot("set-password-done")
    select(ui, "Sign in")
    expect(page).to_have_url(re.compile(r"/browser/sign-in(\?.*)?$"))
    ui.shoot("sign-in")

    # Sign in: without a key the App opens API Keys, with "No API keys yet" and "New key".
    ui.sign_in(user, password="not the password")
    expect(page.get_by_text("The email or password is not right.")).to_be_visible()
    ui.shoot("sign-in-wrong")
    ui.sign_in(user)
    expect(page).to_have_url(re.compile(r"/browser/api-keys$"))
    expect(page.get_by_text("No API keys yet")).to_be_visible()
    expect(page.get_by_role("button", name="New key")).to_be_visible()
    ui.shoot("api-keys-empty")

    # The link works once: used, it says so and offers a new one, which comes as "Reset your
    # password" now that the User has a password.
    other = new_ui()
    other.page.goto(link)
    expect(other.page.get_by_text("The link did not work")).to_be_visible()
    other.shoot("set-password-used-link")
    select(other, "Ask for a new link")
    expect(other.page).to_have_url(re.compile(r"/browser/forgot-password"))
    other.shoot("forgot-password")
    since = app.mailbox.mark()
    other.page.get_by_label("Email", exact=True).fill(user.email)
    other.page.get_by_role("button", name="Send the link").click()
    expect(other.page.get_by_text("Check your email.")).to_be_visible()
    other.shoot("forgot-password-sent")
    reset = app.mailbox.wait_for(user.email, "Reset your password", since=since).link("Choose a new password")
    assert reset.startswith(app.url("reset-password?token=")), reset

    # An unknown address gets the same answer, and no mail.
    other.page.reload()
    other.page.get_by_label("Email", exact=True).fill(app.new_email("nobody"))
    other.page.get_by_role("button", name="Send the link").click()
    expect(other.page.get_by_text("Check your email.")).to_be_visible()
    ui.check()
    other.check()


def test_a_new_password_ends_the_session(app: App, new_ui) -> None:
    user = app.approved_user("session")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(user)
    page.get_by_role("link", name="Usage", exact=True).click()
    expect(page).to_have_url(re.compile(r"/browser/usage"))

    # Elsewhere: Forgot password?, the mail "Reset your password", and a new password.
    other: UI = new_ui()
    other.open("sign-in")
    select(other, "Forgot password?")
    since = app.mailbox.mark()
    other.page.get_by_label("Email", exact=True).fill(user.email)
    other.page.get_by_role("button", name="Send the link").click()
    expect(other.page.get_by_text("Check your email.")).to_be_visible()
    link = app.mailbox.wait_for(user.email, "Reset your password", since=since).link("Choose a new password")
    other.page.goto(link)
    heading(other, "Choose a new password")
    other.shoot("reset-password")
    other.page.get_by_label("New password", exact=True).fill("another long password")
    other.page.get_by_role("button", name="Set the new password").click()
    expect(other.page.get_by_text("Your password is changed.")).to_be_visible()
    other.shoot("reset-password-done")

    # The first browser's next page (Jobs) takes it to sign-in, which says so; then back to that page.
    page.get_by_role("link", name="Jobs", exact=True).click()
    expect(page).to_have_url(re.compile(r"/browser/sign-in\?.*next=(%2F|/)jobs"))
    expect(page.get_by_text("Your session has ended.")).to_be_visible()
    ui.shoot("sign-in-session-ended")
    ui.sign_in(user)  # the old password
    expect(page.get_by_text("The email or password is not right.")).to_be_visible()
    ui.sign_in(user, password="another long password")
    expect(page).to_have_url(re.compile(r"/browser/jobs$"))
    expect(page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    ui.check()
    other.check()


def test_the_sign_in_limit(app: App, new_ui) -> None:
    user = app.approved_user("limit")
    ui: UI = new_ui()
    page = ui.page
    ui.open("sign-in")
    for _ in range(5):
        ui.sign_in(user, password="wrong password")
        expect(page.get_by_text("The email or password is not right.")).to_be_visible()
    # The sixth try within the minute, even with the right password, is refused, with the wait.
    ui.sign_in(user)
    expect(page.get_by_text(re.compile(r"Too many tries to sign in\. Wait \d+ seconds?\."))).to_be_visible()
    expect(page).to_have_url(re.compile(r"/browser/sign-in"))
    ui.shoot("sign-in-limit")
    app.serve.clear_sign_in_tries()
    ui.check()


def test_an_invite_sets_up_the_account(app: App, new_ui) -> None:
    email = app.new_email("invite")
    link = json.loads(app.admin("invite", "create", email, "--json"))["link"]
    assert link.startswith(app.url("apply?invite=")), link
    ui: UI = new_ui()
    page = ui.page
    page.goto(link)
    expect(page.get_by_label("Email", exact=True)).to_have_value(email)  # filled in
    ui.shoot("apply-invite")
    page.get_by_label("Name", exact=True).fill("Ivy Invited")
    page.get_by_label("Organization", exact=True).fill("ACS tests")
    page.get_by_label("Planned usage", exact=True).fill("Try the App.")
    page.get_by_label("I agree to these rules.").check()
    page.get_by_role("button", name="Set up my account").click()
    heading(ui, "Set your password")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Set the password").click()
    expect(page.get_by_text("Your password is set.")).to_be_visible()
    select(ui, "Sign in")
    ui.sign_in(User(email, "Ivy Invited"))
    expect(page).to_have_url(re.compile(r"/browser/api-keys$"))

    # The invite link works once.
    page.goto(link)
    expect(page.get_by_text("The link did not work")).to_be_visible()
    ui.shoot("apply-invite-used")
    ui.check()


def test_empty_sign_in_and_forgot_password_forms_ask_for_their_fields(app: App, new_ui) -> None:
    """Issue 37: an empty form says what to fill in, under each field, and sends nothing; an empty
    Forgot password form must not say "Check your email." as if a link had gone."""
    ui: UI = new_ui()
    page = ui.page
    sent: list[str] = []
    page.on("request", lambda request: sent.extend(
        [request.url] if request.method == "POST" and "/account/" in request.url else []))

    ui.open("sign-in")
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_label("Email", exact=True)).to_have_accessible_description("Enter your email.")
    expect(page.get_by_label("Password", exact=True)).to_have_accessible_description("Enter your password.")
    expect(page.get_by_label("Email", exact=True)).to_be_focused()  # the first field to fix
    ui.shoot("sign-in-empty")
    # With the email alone, the App asks for the password only.
    page.get_by_label("Email", exact=True).fill(app.new_email("empty"))
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_label("Password", exact=True)).to_have_accessible_description("Enter your password.")
    expect(page.get_by_text("Enter your email.")).to_have_count(0)
    expect(page.get_by_label("Password", exact=True)).to_be_focused()

    select(ui, "Forgot password?")
    expect(page).to_have_url(re.compile(r"/browser/forgot-password"))
    page.get_by_label("Email", exact=True).fill("")
    select(ui, "Send the link")
    expect(page.get_by_label("Email", exact=True)).to_have_accessible_description("Enter your email.")
    expect(page.get_by_text("Check your email.")).to_have_count(0)
    ui.shoot("forgot-password-empty")
    assert sent == [], sent  # neither form sent anything empty
    ui.check()
