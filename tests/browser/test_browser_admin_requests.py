"""Admin's Applications and Token requests tabs in a real browser (issue 37; spec "Decide token requests",
"Get access"). A User asks for tokens on Request more tokens, an admin reads the request and approves it for
another amount, and the User's page shows `50K of 100M`; another request is rejected by keyboard with a note
that its User reads; a request from before the form asked for a project shows None. An Application is read,
each empty answer "Not answered", and approved from its dialog, and the approval mail reaches the loopback
mailbox; another is rejected with a note that its mail quotes. An Invite made with a Tag gives its link once,
and the User who uses it gets the tag as the App writes it. axe-core and screenshots at 1280 and 390 px."""
from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import APPROVED, App, UI, tab_to
from tests.browser.page_calls import ok

NOT_ANSWERED = "Not answered"
REJECTED = "Your ACS Infra application"


def row_of(page: Any, text: str) -> Any:
    return page.get_by_role("row").filter(has_text=text)


def expect_cells(row: Any, texts: list[Any]) -> None:
    """The row's cells from the first, up to the menu's."""
    for index, text in enumerate(texts):
        expect(row.get_by_role("cell").nth(index)).to_have_text(text)


def fits_a_phone(ui: UI) -> None:
    """At 390 px nothing reaches past the page's right edge: wide tables scroll in their own box."""
    page = ui.page
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(150)
    wider = page.evaluate("""() => {
        const width = document.documentElement.clientWidth;
        if (document.documentElement.scrollWidth <= width) return [];
        return [...document.querySelectorAll("body *")].filter((element) => {
            const box = element.getBoundingClientRect();
            return box.width && box.right > width + 1 && !element.closest(".table-scroll, .admin-tabs");
        }).slice(0, 8).map((element) => `${element.tagName}.${element.className} ${element.getBoundingClientRect().right}`);
    }""")
    page.set_viewport_size({"width": 1280, "height": 800})
    assert wider == [], wider


def whole_at_1280(page: Any, table: str) -> None:
    """The table's columns fit the page at 1280 px: nothing of it scrolls out of view."""
    box = page.get_by_role("region", name=table, exact=True)
    assert box.evaluate("box => box.scrollWidth <= box.clientWidth"), f"{table} scrolls at 1280 px"


def row_action(page: Any, text: str, action: str) -> None:
    """Open the menu at the end of the row, and select the action."""
    row_of(page, text).get_by_role("button", name=re.compile(r"^Actions of")).click()
    page.get_by_role("menuitem", name=action, exact=True).click()


def answer_of(dialog: Any, question: str) -> Any:
    """The answer under a question of a Read dialog."""
    return dialog.locator(".answer").filter(has=dialog.page.get_by_text(question, exact=True)).locator("dd")


def ask_for_tokens(ui: UI, tokens: str, project: str) -> None:
    """Request more tokens, as the User fills it in."""
    page = ui.page
    ui.open("usage/request")
    page.get_by_label("Tokens", exact=True).fill(tokens)
    page.get_by_role("group", name="Models").get_by_role("checkbox").first.check()
    page.get_by_label("Project", exact=True).fill(project)
    page.get_by_label("Planned usage", exact=True).fill("Activations of 20,000 prompts at 4 Layers.")
    page.get_by_label("When you need them").fill("By June")
    page.get_by_role("button", name="Send request").click()
    expect(page.get_by_text("Request sent.")).to_be_visible()


def old_request(app: App, email: str) -> None:
    """A request from before the form asked for a project, its reason kept as the planned usage."""
    async def add(session: Any) -> None:
        from sqlmodel import select

        from ledger.accounts.tables import User
        from ledger.tokens.tables import TokenRequest

        user = (await session.exec(select(User).where(User.email == email))).one()
        session.add(TokenRequest(user_id=user.id, created_at=datetime.now(timezone.utc), tokens=2_000_000,
                                 models=[], project="", planned_usage="An old reason: more sweeps."))
        await session.commit()

    app.serve.read_ledger(add)


def test_an_admin_decides_token_requests(app: App, new_ui: Any) -> None:
    asker, refused, older = (app.approved_user(tag) for tag in ("asker", "refused", "older"))
    asker_ui: UI = new_ui()
    asker_ui.first_sign_in(asker)
    ask_for_tokens(asker_ui, "100M", "Refusal directions")
    refused_ui: UI = new_ui()
    refused_ui.first_sign_in(refused)
    ok(refused_ui.page, "POST", "account/token-requests", {
        "tokens": "5M", "models": ["tiny-llama"], "project": "Probes", "planned_usage": "Linear probes."}, status=201)
    old_request(app, older.email)

    admin = app.approved_admin("decider", "Admin Decider")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(admin)
    ui.open("admin?tab=token-requests")
    expect(page.get_by_role("tab", name="Token requests")).to_have_attribute("aria-selected", "true")
    for column in ("User", "Tokens asked", "Project", "Status", "Tokens granted", "Decided"):
        expect(page.get_by_role("columnheader", name=column, exact=True)).to_be_visible()
    row = row_of(page, asker.email)
    expect_cells(row, [re.compile(re.escape(asker.name)), "100M", "Refusal directions", "Waiting", "—", "—"])
    expect(row_of(page, older.email).get_by_role("cell").nth(2)).to_have_text("None")
    ui.shoot("token-requests")
    fits_a_phone(ui)

    # Read the request: each answer under its question, an empty one Not answered.
    row_action(page, asker.email, "Read the request")
    dialog = page.get_by_role("dialog", name=f"Request of {asker.name}")
    expect(dialog).to_be_visible()
    expect(answer_of(dialog, "Tokens")).to_have_text("100,000,000 (100M)")
    expect(answer_of(dialog, "Models")).to_have_text("tiny llama random")  # its short name, as every page
    expect(answer_of(dialog, "Project")).to_have_text("Refusal directions")
    expect(answer_of(dialog, "Planned usage")).to_have_text("Activations of 20,000 prompts at 4 Layers.")
    expect(answer_of(dialog, "When you need them")).to_have_text("By June")
    for question in ("How you got the number", "Results", "Links"):
        expect(answer_of(dialog, question)).to_have_text(NOT_ANSWERED)
    ui.shoot("token-requests-read")
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()

    # An old request's reason is under Planned usage, and its Project Not answered.
    row_action(page, older.email, "Read the request")
    dialog = page.get_by_role("dialog", name=f"Request of {older.name}")
    expect(answer_of(dialog, "Planned usage")).to_have_text("An old reason: more sweeps.")
    expect(answer_of(dialog, "Project")).to_have_text(NOT_ANSWERED)
    expect(answer_of(dialog, "Models")).to_have_text(NOT_ANSWERED)
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    # Approve for another amount: Tokens to grant starts at the tokens asked.
    row_action(page, asker.email, "Approve")
    dialog = page.get_by_role("dialog", name=f"Approve the request of {asker.name}")
    tokens = dialog.get_by_label("Tokens to grant")
    expect(tokens).to_have_value("100M")
    expect(tokens).to_be_focused()
    tokens.fill("lots")
    dialog.get_by_role("button", name="Approve", exact=True).click()
    expect(dialog.get_by_text(re.compile(r"is not a whole number of tokens"))).to_be_visible()
    ui.shoot("token-requests-approve")
    tokens.fill("50K")
    dialog.get_by_role("button", name="Approve", exact=True).click()
    expect(dialog).to_be_hidden()
    expect(page.get_by_role("status").filter(has_text="50,000 tokens granted")).to_be_visible()
    expect_cells(row, [re.compile(re.escape(asker.name)), "100M", "Refusal directions", "Approved", "50K",
                       re.compile(r"^Admin Decider, \d\d:\d\d UTC$")])
    expect(row.get_by_role("button", name=re.compile("^Actions of"))).to_be_visible()
    row.get_by_role("button", name=re.compile("^Actions of")).click()
    expect(page.get_by_role("menuitem", name="Approve", exact=True)).to_have_count(0)  # decided once
    page.keyboard.press("Escape")

    # Reject by keyboard, with a Note to them (its row is above: the waiting ones come first).
    menu = row_of(page, refused.email).get_by_role("button", name=re.compile("^Actions of"))
    page.get_by_role("tab", name="Token requests").focus()
    tab_to(page, menu)
    page.keyboard.press("Enter")
    expect(page.get_by_role("menuitem", name="Read the request")).to_be_focused()
    page.keyboard.press("End")
    expect(page.get_by_role("menuitem", name="Reject")).to_be_focused()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name=f"Reject the request of {refused.name}")
    note = dialog.get_by_label("Note to them")
    expect(note).to_be_focused()
    page.keyboard.type("Write the paper first.")
    tab_to(page, dialog.get_by_role("button", name="Reject", exact=True))
    ui.shoot("token-requests-reject")
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()
    expect(row_of(page, refused.email).get_by_role("cell").nth(3)).to_have_text(re.compile(r"^Rejected"))
    whole_at_1280(page, "Token requests")
    ui.shoot("token-requests-decided")

    # Each User reads the decision on Request more tokens.
    asker_ui.open("usage/request")
    expect(row_of(asker_ui.page, "Approved").get_by_role("cell").nth(1)).to_have_text("50K of 100M")
    asker_ui.shoot("usage-request-approved")
    refused_ui.open("usage/request")
    expect(row_of(refused_ui.page, "Rejected")).to_contain_text("Write the paper first.")
    assert ok(asker_ui.page, "GET", "account/usage")["budget"] == {"left": 50_000}
    for visitor in (asker_ui, refused_ui, ui):
        visitor.check()


def apply(app: App, tag: str, **answers: str) -> str:
    email = app.new_email(tag)
    with app.account() as http:
        answer = http.post("/account/applications", json={
            "email": email, "name": f"Applicant {tag.title()}", "organization": "Analytical Engines",
            "planned_usage": "Probing base models.", "agree_to_rules": True, **answers})
        assert answer.status_code == 201, answer.text
    return email


def test_an_admin_decides_applications_and_makes_invites(app: App, new_ui: Any) -> None:
    approved = apply(app, "approved", links="https://example.org/paper")
    rejected = apply(app, "rejected")
    admin = app.approved_admin("apps", "Admin Apps")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(admin)
    ui.open("admin?tab=applications")
    for column in ("Email", "Name", "Organization", "Applied", "Status"):
        expect(page.get_by_role("columnheader", name=column, exact=True)).to_be_visible()
    expect(row_of(page, approved).get_by_role("cell").nth(4)).to_have_text("Waiting")
    # The waiting ones come first: no decided row above a waiting one.
    statuses = [text.strip() for text in page.locator(".applications-table tbody tr td:nth-child(5)").all_inner_texts()]
    assert statuses == sorted(statuses, key=lambda status: status != "Waiting"), statuses
    ui.shoot("applications")
    fits_a_phone(ui)
    # On a phone the row keeps its status and its menu in view: the name and the day go under the email.
    page.set_viewport_size({"width": 390, "height": 844})
    under = row_of(page, approved).get_by_text(re.compile(r"^Applicant Approved, \d\d:\d\d UTC$"))
    expect(under).to_be_visible()
    table = page.get_by_role("region", name="Applications")
    assert table.evaluate("box => box.scrollWidth <= box.clientWidth"), "the table scrolls at 390 px"
    page.set_viewport_size({"width": 1280, "height": 800})
    expect(under).to_be_hidden()  # at 1280 the name and the day have columns of their own

    # Read the Application, then approve it from its dialog, with tokens for the Budget.
    row_action(page, approved, "Read the application")
    dialog = page.get_by_role("dialog", name="Application of Applicant Approved")
    expect(answer_of(dialog, "Email")).to_have_text(approved)
    expect(answer_of(dialog, "Organization")).to_have_text("Analytical Engines")
    expect(answer_of(dialog, "Planned usage")).to_have_text("Probing base models.")
    expect(answer_of(dialog, "Links to your work")).to_have_text("https://example.org/paper")
    expect(answer_of(dialog, "How did you hear of ACS Infra?")).to_have_text(NOT_ANSWERED)
    expect(answer_of(dialog, "How many tokens do you expect to need?")).to_have_text(NOT_ANSWERED)
    ui.shoot("applications-read")
    mark = app.mailbox.mark()
    dialog.get_by_role("button", name="Approve", exact=True).click()
    confirm = page.get_by_role("dialog", name="Approve Applicant Approved?")
    expect(confirm).to_contain_text("The link works once, for 7 days.")
    confirm.get_by_label("Tokens").fill("2.5M")
    ui.shoot("applications-approve")
    confirm.get_by_role("button", name="Approve", exact=True).click()
    expect(confirm).to_be_hidden()
    expect(page.get_by_role("status").filter(has_text=f"Approved {approved}.")).to_be_visible()
    expect(row_of(page, approved).get_by_role("cell").nth(4)).to_have_text("Approved")
    mail = app.mailbox.wait_for(approved, APPROVED, since=mark)
    assert "/set-password?token=" in mail.link("Choose your password"), mail.text

    # Reject another, with a note that its mail quotes.
    row_action(page, rejected, "Reject")
    confirm = page.get_by_role("dialog", name="Reject Applicant Rejected?")
    confirm.get_by_label("Note to them").fill("Tell us more about the project.")
    confirm.get_by_role("button", name="Reject", exact=True).click()
    expect(confirm).to_be_hidden()
    expect(row_of(page, rejected).get_by_role("cell").nth(4)).to_have_text("Rejected")
    mail = app.mailbox.wait_for(rejected, REJECTED, since=mark)
    assert "Tell us more about the project." in mail.text and "/apply" in mail.text, mail.text
    row_action(page, rejected, "Read the application")
    dialog = page.get_by_role("dialog", name="Application of Applicant Rejected")
    expect(dialog).to_contain_text("Tell us more about the project.")
    expect(dialog.get_by_role("button", name="Approve")).to_have_count(0)
    dialog.get_by_role("button", name="Close").click()

    # Make Invites: the Tag as the App writes it, the link once, with Copy.
    page.get_by_role("button", name="Make Invites").click()
    dialog = page.get_by_role("dialog", name="Make Invites")
    invited = app.new_email("invited")
    dialog.get_by_label("Email").fill(invited)
    tag = dialog.get_by_label("Tag")
    tag.fill("Hiring 2026 08")
    expect(dialog.get_by_text("Written as hiring-2026-08.")).to_be_visible()
    dialog.get_by_label("Tokens").fill("50K")
    dialog.get_by_label("Tokens").focus()
    expect(tag).to_have_value("hiring-2026-08")
    ui.shoot("applications-invite")
    dialog.get_by_role("button", name="Make Invite").click()
    link = dialog.get_by_label("Invite link")
    expect(link).to_be_focused()
    address = link.input_value()
    assert re.search(r"/apply\?invite=", address), address
    expect(dialog).to_contain_text("hiring-2026-08")
    dialog.get_by_role("button", name="Copy", exact=True).click()
    assert page.evaluate("() => navigator.clipboard.readText()") == address
    expect(dialog.get_by_text("Copied the link.")).to_be_visible()
    ui.shoot("applications-invite-made")
    dialog.get_by_role("button", name="Done").click()
    expect(dialog).to_be_hidden()

    # The invited User sets up the account; they get the Invite's tag.
    guest: UI = new_ui()
    guest.page.goto(address)
    expect(guest.page.get_by_label("Email")).to_have_value(invited)
    guest.page.get_by_label("Name", exact=True).fill("Invited Guest")
    guest.page.get_by_label("Organization").fill("ACS tests")
    guest.page.get_by_label("Planned usage").fill("Browser tests of Invites.")
    guest.page.get_by_label("I agree to these rules.").check()
    guest.page.get_by_role("button", name="Set up my account").click()
    expect(guest.page).to_have_url(re.compile(r"/set-password\?token="))
    tagged = ok(page, "GET", "v1/admin/users?tag=hiring-2026-08")["users"]
    assert "Invited Guest" in [user["name"] for user in tagged], tagged
    ui.open("admin?tab=applications")
    expect(row_of(page, invited).get_by_role("cell").nth(4)).to_have_text("Approved")
    whole_at_1280(page, "Applications")
    for visitor in (ui, guest):
        visitor.check()
