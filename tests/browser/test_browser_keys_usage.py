"""API keys and Usage in a real browser ("Use API keys", "Use the App" in the
spec's docs): a key made and copied by keyboard alone, the spec's openai call
with the copied key, its Completion on Usage; a token request; Profile and
Jobs; rename, pause, resume and revoke, with the 401s that /v1 then answers."""
from __future__ import annotations

import re
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.browser.conftest import App, UI, drawn, tab_to

PAUSED = "This API key is paused. Resume it on API Keys in the App to use it again."
REVOKED = "This API key has been revoked."
AT_LIMIT = "You have 10 API keys, the most that a User may have. Delete one to make another."


def key_row(page: Any, name: str) -> Any:
    return page.get_by_role("row").filter(has=page.get_by_text(name, exact=True))


def key_action(page: Any, name: str, action: str) -> None:
    """Open the menu at the end of the key's row, and select the action."""
    key_row(page, name).get_by_role("button").last.click()
    page.get_by_role("menuitem", name=action, exact=True).click()


def sign_in_by_keyboard(ui: UI, email: str, password: str) -> None:
    page = ui.page
    ui.open("sign-in")
    tab_to(page, page.get_by_label("Email", exact=True))
    page.keyboard.type(email)
    tab_to(page, page.get_by_label("Password", exact=True))
    page.keyboard.type(password)
    with page.expect_response(lambda answer: answer.url.endswith("/account/sign-in")):
        page.keyboard.press("Enter")


def test_a_key_by_keyboard_its_completion_on_usage(app: App, new_ui) -> None:
    user = app.approved_user("keys")
    ui: UI = new_ui()
    page = ui.page

    # Sign in and make a key with the keyboard alone.
    sign_in_by_keyboard(ui, user.email, user.password)
    expect(page).to_have_url(re.compile(r"/browser/api-keys$"))
    expect(page.get_by_text("No API keys yet")).to_be_visible()
    new_key = page.get_by_role("button", name="New key")
    tab_to(page, new_key)
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    name = dialog.get_by_label("Name", exact=True)
    expect(name).to_be_focused()  # focus moves into the dialog
    page.keyboard.type("laptop")
    ui.shoot("api-keys-new-key")
    tab_to(page, dialog.get_by_role("button", name="Create key"))
    page.keyboard.press("Enter")

    copy_dialog = page.get_by_role("dialog", name="Copy your key")
    expect(copy_dialog).to_be_visible()
    shown = copy_dialog.get_by_label("Your new key").input_value()
    assert shown.startswith("sk-acs-"), shown
    expect(copy_dialog.get_by_role("link", name="Set the client for long requests")).to_have_attribute(
        "target", "_blank")
    ui.shoot("api-keys-copy-your-key")
    tab_to(page, copy_dialog.get_by_role("button", name="Copy", exact=True))
    page.keyboard.press("Enter")
    key = page.evaluate("() => navigator.clipboard.readText()")
    assert key == shown, (key, shown)
    expect(copy_dialog.get_by_text("Copied.")).to_be_visible()
    tab_to(page, copy_dialog.get_by_role("button", name="Done"))
    page.keyboard.press("Enter")
    expect(copy_dialog).to_be_hidden()
    row = key_row(page, "laptop")
    expect(row).to_be_visible()
    expect(row).to_contain_text("Active")
    expect(row).to_contain_text(key[:10])  # the key's first characters
    ui.shoot("api-keys")
    # A phone leaves out Budget, Last used and Created.
    page.set_viewport_size({"width": 390, "height": 844})
    for column in ("Budget", "Last used", "Created"):
        expect(page.get_by_role("columnheader", name=column)).to_be_hidden()
    expect(page.get_by_role("columnheader", name="Status")).to_be_visible()
    page.set_viewport_size({"width": 1280, "height": 800})

    # The spec's call with the copied key; its Completion then shows on Usage.
    completion = app.completion(key)
    used = completion.usage
    assert used.prompt_tokens > 0 and used.completion_tokens > 0, used
    tab_to(page, page.get_by_role("link", name="Usage", exact=True))
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/browser/usage"))
    recent = page.get_by_role("row").filter(has_text="laptop").filter(has_text="Completed")
    for _ in range(10):  # the Completion's Hold settles as the answer ends; Refresh reads again
        if recent.count():
            break
        page.get_by_role("button", name="Refresh").click()
        page.wait_for_timeout(1000)
    expect(recent.first).to_be_visible()
    expect(recent.first.get_by_role("cell", name=str(used.prompt_tokens), exact=True)).to_be_visible()
    expect(recent.first.get_by_role("cell", name=str(used.completion_tokens), exact=True)).to_be_visible()
    expect(recent.first).to_contain_text("Reported")
    for part in ("Tokens used", "Monthly allowance", "Token budget", "Tokens per day", "By model", "By source",
                 "By key", "Budget history"):
        expect(page.get_by_role("heading", name=part, exact=True)).to_be_visible()
    expect(page.get_by_text(re.compile(r"^Updated \d"))).to_be_visible()
    ui.shoot("usage")
    # The chart by keyboard: End reads the last day of the range, today.
    chart = page.get_by_role("group", name=re.compile(r"^Tokens per day"))
    tab_to(page, chart)
    page.keyboard.press("End")
    expect(page.get_by_text(re.compile(
        rf": {used.prompt_tokens} input and {used.completion_tokens} output tokens$"))).to_be_visible()
    page.get_by_role("button", name="View as table").click()
    day_table = page.get_by_role("table").filter(has=page.get_by_role("columnheader", name="Day"))
    expect(day_table.get_by_role("row").filter(has_text=str(used.prompt_tokens))).not_to_have_count(0)
    ui.shoot("usage-day-table")

    # One key's usage: the address keeps it, and the page names the account's parts so.
    page.get_by_role("button", name="Today").or_(page.get_by_role("link", name="Today")).first.click()
    expect(page).to_have_url(re.compile(r"range=today"))

    # Ask for more tokens: a Tokens that the App cannot read, then a request.
    page.get_by_role("link", name="Request more tokens").click()
    expect(page).to_have_url(re.compile(r"/browser/usage/request"))
    ui.shoot("usage-request")
    form_tokens = page.get_by_label("Tokens", exact=True)
    form_tokens.fill("lots")
    page.get_by_label("Project", exact=True).fill("Steering small models")
    page.get_by_role("button", name="Send request").click()
    expect(page.get_by_text("Write the tokens as a number, such as 50K or 2.5M.")).to_be_visible()
    expect(page.get_by_label("Project", exact=True)).to_have_value("Steering small models")
    ui.shoot("usage-request-errors")
    form_tokens.fill("50K")
    page.get_by_role("group", name="Models").get_by_role("checkbox").first.check()
    page.get_by_label("Planned usage", exact=True).fill("Sweeps of steering vectors.")
    page.get_by_role("button", name="Send request").click()
    expect(page.get_by_text("Request sent.")).to_be_visible()
    requests = page.get_by_role("table").filter(has_text="Waiting")
    expect(requests).to_be_visible()
    expect(requests).to_contain_text("50K")
    ui.shoot("usage-request-sent")

    # Profile, from the menu with the name; Jobs.
    page.get_by_role("button", name=re.compile(re.escape(user.name))).click()
    page.get_by_role("menuitem", name="Profile").or_(page.get_by_role("link", name="Profile")).first.click()
    expect(page).to_have_url(re.compile(r"/browser/profile"))
    expect(page.get_by_text(user.email)).to_be_visible()
    expect(page.get_by_role("link", name="Reset your password").or_(
        page.get_by_role("button", name="Reset your password")).first).to_be_visible()
    ui.shoot("profile")
    page.get_by_role("link", name="Jobs", exact=True).click()
    expect(page).to_have_url(re.compile(r"/browser/jobs"))
    expect(page.get_by_role("link", name="Run a Job from a script")).to_be_visible()
    ui.shoot("jobs")
    ui.check()


def test_rename_pause_and_revoke_a_key(app: App, new_ui) -> None:
    user = app.approved_user("manage")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(user)

    # New key by pointer; Done without Copy asks first.
    page.get_by_role("button", name="New key").click()
    page.get_by_role("dialog").get_by_label("Name", exact=True).fill("ci")
    page.get_by_role("dialog").get_by_role("button", name="Create key").click()
    copy_dialog = page.get_by_role("dialog", name="Copy your key")
    key = copy_dialog.get_by_label("Your new key").input_value()
    copy_dialog.get_by_role("button", name="Done").click()
    expect(copy_dialog.get_by_role("alert")).to_contain_text("You did not copy the key.")
    ui.shoot("api-keys-done-without-copy")
    copy_dialog.get_by_role("button", name="Go back to the key").click()
    copy_dialog.get_by_role("button", name="Copy", exact=True).click()
    copy_dialog.get_by_role("button", name="Done").click()
    expect(copy_dialog).to_be_hidden()
    assert app.v1_error(key)[0] != 401

    # A second key with the same name in other letters: refused.
    page.get_by_role("button", name="New key").click()
    page.get_by_role("dialog").get_by_label("Name", exact=True).fill("CI")
    page.get_by_role("dialog").get_by_role("button", name="Create key").click()
    expect(page.get_by_role("dialog").get_by_text(re.compile(r"\balready\b"))).to_be_visible()
    ui.shoot("api-keys-name-taken")
    page.get_by_role("dialog").get_by_role("button", name="Cancel").click()

    # Rename.
    key_action(page, "ci", "Rename")
    rename = page.get_by_role("dialog")
    expect(rename.get_by_label("Name", exact=True)).to_be_focused()
    ui.shoot("api-keys-rename")
    rename.get_by_label("Name", exact=True).fill("nightly")
    rename.get_by_role("button", name="Rename").click()
    expect(key_row(page, "nightly")).to_be_visible()

    # Pause, by keyboard through the row's menu: /v1 answers 401 key_disabled with the paused
    # message; Resume: it works again.
    tab_to(page, key_row(page, "nightly").get_by_role("button").last)
    page.keyboard.press("Enter")
    expect(page.get_by_role("menuitem", name="Rename", exact=True)).to_be_focused()
    ui.shoot("api-keys-menu")
    hidden = [item for item in ("Rename", "Pause", "View usage", "Revoke")
              if not drawn(page.get_by_role("menuitem", name=item, exact=True))]
    assert not hidden, f"the key's menu hides {hidden}: clipped by the table's box (api-keys-menu-*.png)"
    page.keyboard.press("ArrowDown")
    expect(page.get_by_role("menuitem", name="Pause", exact=True)).to_be_focused()
    page.keyboard.press("Enter")
    expect(key_row(page, "nightly")).to_contain_text("Paused")
    ui.shoot("api-keys-paused")
    status, error = app.v1_error(key)
    assert (status, error.get("code"), error.get("message")) == (401, "key_disabled", PAUSED), (status, error)
    key_action(page, "nightly", "Resume")
    expect(key_row(page, "nightly")).to_contain_text("Active")
    assert app.v1_error(key)[0] != 401

    # Revoke: Cancel keeps it; Revoke key stops it at once, and the page is empty again.
    key_action(page, "nightly", "Revoke")
    confirm = page.get_by_role("dialog")
    expect(confirm.get_by_role("button", name="Revoke key")).to_be_visible()
    ui.shoot("api-keys-revoke")
    confirm.get_by_role("button", name="Cancel").click()
    expect(key_row(page, "nightly")).to_be_visible()
    key_action(page, "nightly", "Revoke")
    page.get_by_role("dialog").get_by_role("button", name="Revoke key").click()
    expect(page.get_by_text("No API keys yet")).to_be_visible()
    expect(page.get_by_role("table")).to_have_count(0)
    status, error = app.v1_error(key)
    assert (status, error.get("code"), error.get("message")) == (401, "key_revoked", REVOKED), (status, error)
    ui.shoot("api-keys-after-revoke")

    # At 10 keys, New key is off and a note says why.
    csrf = {cookie["name"]: cookie["value"] for cookie in ui.context.cookies()}["acs_csrf"]
    for number in range(10):
        made = ui.context.request.post(app.url("account/keys"), data={"name": f"key {number}"},
                                       headers={"X-CSRF-Token": csrf})
        assert made.status == 201, made.text()
    page.reload()
    expect(key_row(page, "key 9")).to_be_visible()
    expect(page.get_by_role("button", name="New key")).to_be_disabled()
    expect(page.get_by_text(AT_LIMIT)).to_be_visible()
    ui.shoot("api-keys-at-limit")

    # The session works only in the App: /v1 reads no cookie.
    session = {cookie["name"]: cookie["value"] for cookie in ui.context.cookies()}
    assert "acs_session" in session, session
    answer = httpx.get(f"{app.v1}/models", cookies={"acs_session": session["acs_session"]}, timeout=60)
    assert (answer.status_code, answer.json()["error"]["code"]) == (401, "missing_authorization"), answer.text
    ui.check()


def test_copy_your_key_shows_the_whole_key(app: App, new_ui) -> None:
    """Issue 37: Copy your key shows all of the key, sk-acs- included, at both widths; a one-line
    field scrolled to the key's end when it selected the key, and hid the start."""
    user = app.approved_user("wholekey")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(user)
    page.get_by_role("button", name="New key").click()
    page.get_by_role("dialog").get_by_label("Name", exact=True).fill("whole")
    page.get_by_role("dialog").get_by_role("button", name="Create key").click()
    copy_dialog = page.get_by_role("dialog", name="Copy your key")
    shown = copy_dialog.get_by_label("Your new key")
    expect(shown).to_have_value(re.compile(r"^sk-acs-\S{20,}$"))
    shown.click()  # selects the key, as a User about to copy it by hand does
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(150)
        fits = shown.evaluate("""field => ({scroll: [field.scrollLeft, field.scrollTop],
            width: [field.scrollWidth, field.clientWidth], height: [field.scrollHeight, field.clientHeight]})""")
        assert fits["scroll"] == [0, 0], (width, fits)
        assert fits["width"][0] <= fits["width"][1] and fits["height"][0] <= fits["height"][1], (width, fits)
        assert drawn(shown), width
    page.set_viewport_size({"width": 1280, "height": 800})
    ui.shoot("api-keys-copy-your-key-whole")
    copy_dialog.get_by_role("button", name="Copy", exact=True).click()
    assert page.evaluate("() => navigator.clipboard.readText()") == shown.input_value()
    copy_dialog.get_by_role("button", name="Done").click()
    expect(copy_dialog).to_be_hidden()
    ui.check()


def test_a_waiting_request_is_said_before_the_form(app: App, new_ui) -> None:
    """Issue 37: with a request Waiting, Request more tokens says so at the top, before the form,
    rather than refusing after the whole form is filled. Your requests sits beside the form at
    1280 px, and under it on a phone."""
    user = app.approved_user("waiting")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(user)
    ui.open("usage/request")
    waiting = page.get_by_text("You have a request waiting. Once an admin decides it, you can ask again.")
    send = page.get_by_role("button", name="Send request")
    tokens = page.get_by_label("Tokens", exact=True)
    yours = page.get_by_role("heading", name="Your requests", exact=True)
    expect(page.get_by_text("You have sent no requests yet.")).to_be_visible()
    expect(waiting).to_have_count(0)
    # Beside the form at a laptop's width: the heading starts right of the form, level with it.
    form_box, yours_box = tokens.bounding_box(), yours.bounding_box()
    assert form_box and yours_box and yours_box["x"] >= form_box["x"] + form_box["width"], (form_box, yours_box)
    assert yours_box["y"] < form_box["y"] + form_box["height"] + 200, (form_box, yours_box)
    ui.shoot("usage-request-two-columns")

    tokens.fill("2.5M")
    page.get_by_role("group", name="Models").get_by_role("checkbox").first.check()
    page.get_by_label("Project", exact=True).fill("Probes of small models")
    page.get_by_label("Planned usage", exact=True).fill("Linear probes on each layer.")
    with page.expect_response(lambda answer: answer.url.endswith("/account/token-requests")
                              and answer.request.method == "POST") as answered:
        send.click()
    request_id = answered.value.json()["id"]
    expect(page.get_by_text("Request sent.")).to_be_visible()

    # Opened again, the page says first that a request waits, and Send request is off.
    ui.open("usage/request")
    expect(waiting).to_be_visible()
    expect(send).to_be_disabled()
    expect(send).to_have_accessible_description(re.compile(r"^You have a request waiting\."))
    assert waiting.bounding_box()["y"] < tokens.bounding_box()["y"]
    expect(page.get_by_role("table").filter(has_text="Waiting")).to_contain_text("2.5M")
    ui.shoot("usage-request-waiting")
    # On a phone, Your requests comes under the form.
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(150)
    form_box, yours_box = send.bounding_box(), yours.bounding_box()
    assert form_box and yours_box and yours_box["y"] > form_box["y"] + form_box["height"], (form_box, yours_box)
    assert waiting.bounding_box()["y"] < tokens.bounding_box()["y"]
    page.set_viewport_size({"width": 1280, "height": 800})

    # Once an admin decides it, the User can ask again.
    app.admin("token-request", "reject", request_id, "--note", "Write the paper first.")
    ui.open("usage/request")
    expect(page.get_by_role("table").filter(has_text="Rejected")).to_contain_text("Write the paper first.")
    expect(waiting).to_have_count(0)
    expect(send).to_be_enabled()
    ui.check()
