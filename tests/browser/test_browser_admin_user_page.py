"""A User's page on Admin in a real browser (issue 37, spec "Open a User's page"): an admin opens a User's
page and reads their account, tags, Budget and usage counted as Usage counts (a Completion the User ran with
their key), API keys and Application; saves Details with an organization, then clears it and the
Application's answer shows again; adds a note; and Copy User id puts the id on the clipboard. A normal User
at the same address gets the App's Page not found. axe-core and screenshots at 1280 and 390 px."""
from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import App, UI, tab_to
from tests.browser.page_calls import ok

APPLICATION_ORGANIZATION = "ACS tests"  # what app.approved_user answers in its Application


def user_with_a_completion(app: App, new_ui: Any) -> tuple[Any, str, UI]:
    """A User who made a key in the App and ran a Completion with it; (the User, their id, their visitor)."""
    user = app.approved_user("userpage")
    ui: UI = new_ui()
    ui.first_sign_in(user)
    key = ok(ui.page, "POST", "account/keys", {"name": "laptop"}, status=201)["key"]
    app.completion(key)
    return user, ok(ui.page, "GET", "account/me")["id"], ui


def part(page: Any, title: str) -> Any:
    """A part of the page: its section, named by its heading."""
    return page.get_by_role("region", name=title, exact=True)


def told(section: Any, term: str) -> Any:
    """What a list of terms (Account's facts, Application's questions) says after `term`."""
    return section.locator("dt").filter(has_text=re.compile(rf"^{re.escape(term)}$")).locator("xpath=following-sibling::dd[1]")


def test_an_admin_reads_and_changes_a_users_page(app: App, new_ui: Any) -> None:
    user, user_id, visitor = user_with_a_completion(app, new_ui)

    # A normal User at the address gets the App's Page not found, and no part of the page.
    visitor.open(f"admin/users/{user_id}")
    expect(visitor.page.get_by_role("heading", name="Page not found", exact=True)).to_be_visible()
    expect(visitor.page.get_by_role("heading", name=user.email)).to_have_count(0)
    visitor.check()

    admin = app.approved_admin("pageadmin")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(admin)
    ui.open(f"admin/users/{user_id}")
    expect(page.get_by_role("heading", name=user.email, level=1)).to_be_visible()

    # Account: who they are, and the organization of their Application until an admin types one.
    account = part(page, "Account")
    expect(account.get_by_text(user.name, exact=True)).to_be_visible()
    organization = account.get_by_test_id("user-organization")
    expect(organization).to_have_text(f"{APPLICATION_ORGANIZATION} (their Application's answer)")
    expect(told(account, "Standing")).to_have_text("Active")
    expect(told(account, "Engagement")).to_have_text("Active")  # a Completion today
    expect(told(account, "Last Completion")).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))
    expect(part(page, "Tags").get_by_text("No tags.")).to_be_visible()

    # The menu beside the email: the actions of the User's row on Users, then Copy User id. Add tag tags them.
    menu = page.get_by_role("button", name=f"Actions for {user.email}")
    menu.click()
    expect(page.get_by_role("menuitem")).to_have_text(
        ["Suspend", "Restore", "Add tag", "Remove tag", "Set allowance", "Delete", "Copy User id"])
    page.get_by_role("menuitem", name="Add tag").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Tag", exact=True).fill("Hiring 2026 08")
    dialog.get_by_role("button", name="Add tag 1 User").click()
    expect(dialog.get_by_role("status")).to_have_text("Tagged 1 User (hiring-2026-08).")
    dialog.get_by_role("button", name="Done").click()
    expect(part(page, "Tags").get_by_role("listitem")).to_have_text(["hiring-2026-08"])

    # Budget and usage counts the Completion that the User ran with their key, as their Usage does.
    usage = part(page, "Budget and usage")
    expect(usage.get_by_role("group", name="Days")).to_be_visible()
    recent = usage.get_by_role("region", name="Completions, newest 100")
    expect(recent.get_by_role("row").filter(has_text="laptop")).to_have_count(1)
    by_key = usage.get_by_role("region", name="By key")
    expect(by_key.get_by_role("button", name="laptop")).to_be_visible()
    completions_card = usage.locator(".stat").filter(has=page.get_by_role("heading", name="Completions", exact=True))
    expect(completions_card.locator(".big")).to_have_text("1")
    expect(usage.get_by_role("link", name="Request more tokens")).to_have_count(0)  # the User's own link
    # The models to choose from are the App's, as on Usage (choosing one: the next test).
    options = usage.get_by_label("Model", exact=True).locator("option").all_inner_texts()
    assert options[0] == "All models" and len(options) >= 2, options
    ui.shoot("admin-user-page")

    # API keys: their key with its status and when it was last used.
    keys = part(page, "API keys")
    row = keys.get_by_role("row").filter(has_text="laptop")
    expect(row.get_by_role("cell").nth(1)).to_have_text("Active")
    expect(row.get_by_role("cell").nth(4)).to_have_text(re.compile(r"^\d\d:\d\d UTC$"))

    # Application: each answer under its question; an empty one says Not answered.
    application = part(page, "Application")
    expect(told(application, "Planned usage")).to_have_text("Browser tests of the App.")
    expect(told(application, "Links to your work")).to_have_text("Not answered")

    # Details: a typed organization replaces the Application's; cleared, the Application's shows again.
    details = part(page, "Details")
    details.get_by_label("Organization", exact=True).fill("Analytical Engines")
    details.get_by_label("Discord handle", exact=True).fill("ada.lovelace")
    details.get_by_role("button", name="Save details").click()
    expect(details.get_by_role("status")).to_have_text("Details saved.")
    expect(organization).to_have_text("Analytical Engines")
    expect(account.get_by_text("ada.lovelace", exact=True)).to_be_visible()
    page.reload()
    expect(part(page, "Details").get_by_label("Organization", exact=True)).to_have_value("Analytical Engines")
    expect(part(page, "Details").get_by_label("Discord handle", exact=True)).to_have_value("ada.lovelace")
    part(page, "Details").get_by_label("Organization", exact=True).fill("")
    part(page, "Details").get_by_role("button", name="Save details").click()
    expect(part(page, "Details").get_by_role("status")).to_have_text("Details saved.")
    expect(part(page, "Account").get_by_test_id("user-organization")).to_have_text(
        f"{APPLICATION_ORGANIZATION} (their Application's answer)")
    expect(part(page, "Account").get_by_text("ada.lovelace", exact=True)).to_be_visible()  # the handle stays

    # Notes: a note by keyboard, listed with the admin who wrote it.
    notes = part(page, "Notes")
    expect(notes.get_by_text("No notes yet.")).to_be_visible()
    field = notes.get_by_label("New note")
    tab_to(page, field, limit=80)
    page.keyboard.type("Met at the interpretability workshop.")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(notes.get_by_role("status")).to_have_text("Note added.")
    note = notes.get_by_role("listitem").filter(has_text="Met at the interpretability workshop.")
    expect(note).to_contain_text(admin.email)
    expect(field).to_have_value("")
    ui.shoot("admin-user-page-note")
    note.get_by_role("button", name=re.compile(r"^Delete the note of ")).click()
    page.get_by_role("dialog", name="Delete this note?").get_by_role("button", name="Delete note").click()
    expect(notes.get_by_role("status")).to_have_text("Note deleted.")
    expect(notes.get_by_text("No notes yet.")).to_be_visible()

    # Copy User id: from the menu beside the email, the id that the logs name the User by.
    menu.click()
    page.get_by_role("menuitem", name="Copy User id").click()
    expect(page.get_by_text("Copied the User id.")).to_be_visible()
    assert page.evaluate("() => navigator.clipboard.readText()") == user_id
    ui.check()


def test_a_model_chosen_in_budget_and_usage_is_kept_in_the_address(app: App, new_ui: Any) -> None:
    _, user_id, _ = user_with_a_completion(app, new_ui)
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(app.approved_admin("pagemodel"))
    ui.open(f"admin/users/{user_id}")
    usage = part(page, "Budget and usage")
    expect(usage.get_by_role("region", name="Completions, newest 100").get_by_role("row").filter(
        has_text="laptop")).to_have_count(1)
    usage.get_by_role("button", name="Today", exact=True).click()
    expect(page).to_have_url(re.compile(r"range=today"))
    model = usage.get_by_label("Model", exact=True)
    used = model.locator("option").nth(1).get_attribute("value")
    model.select_option(used)
    expect(page).to_have_url(re.compile(rf"range=today&model={re.escape(used or '')}"))
    expect(usage.get_by_role("heading", name="The account's monthly allowance")).to_be_visible()
    page.reload()
    expect(part(page, "Budget and usage").get_by_label("Model", exact=True)).to_have_value(used or "")
    ui.shoot("admin-user-page-model")
    ui.check()
