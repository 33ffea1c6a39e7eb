"""The App's frame in a real browser (issue 35, "Fix the App's shell first"): hidden navigation gives
the page the whole width and comes back with the same toggle; an address that no page has shows the
App's own "Page not found" (while the API keeps its JSON 404); a 200-character name keeps the phone
layout 390 px wide; and a failed submit takes the User to the first error, on every kind of form."""
from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import PREFIX, App, UI, WIDTHS

DESKTOP, PHONE = WIDTHS["desktop"], WIDTHS["phone"]
NAV_WIDTH = 220  # app.css --nav-width
MAIN_MAX = 1200  # app.css .main max-width


def at(ui: UI, size: tuple[int, int]) -> None:
    ui.page.set_viewport_size({"width": size[0], "height": size[1]})


def box(target: Any) -> dict[str, float]:
    found = target.bounding_box()
    assert found is not None, f"{target} is not drawn"
    return found


def page_width(ui: UI) -> int:
    """How wide the document is: wider than the window means a sideways scroll."""
    return int(ui.page.evaluate("() => document.documentElement.scrollWidth"))


def window_width(ui: UI) -> int:
    """The window's width inside any scroll bar."""
    return int(ui.page.evaluate("() => document.documentElement.clientWidth"))


def navigation(ui: UI) -> Any:
    return ui.page.get_by_role("navigation", name="The App")


def toggle(ui: UI) -> Any:
    return ui.page.get_by_role("button", name="Navigation", exact=True)


def in_view(ui: UI, target: Any) -> bool:
    """Whether the whole element is inside the window, below the sticky top bar (if the page has one)."""
    return bool(target.evaluate("""element => {
        const box = element.getBoundingClientRect();
        const bar = document.querySelector(".topbar");
        const top = bar ? bar.getBoundingClientRect().bottom : 0;
        return box.top >= top - 1 && box.bottom <= window.innerHeight + 1 && box.left >= 0 && box.right <= window.innerWidth + 1;
    }"""))


# -- 1. Hidden navigation ---------------------------------------------------------------------------

def test_hidden_navigation_gives_the_page_the_whole_width(app: App, new_ui: Any) -> None:
    user = app.approved_user("nav")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(user)
    ui.open("jobs")
    expect(page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    main = page.locator("main#main")

    # Shown: the page sits beside the navigation.
    expect(navigation(ui)).to_be_visible()
    # Docs says where this platform serves the workshop notebook, and the notebook is there.
    notebook = app.url("downloads/workshop.ipynb")
    docs = navigation(ui).get_by_role("link", name="Docs", exact=True)
    expect(docs).to_have_accessible_description(f"The docs. The workshop notebook downloads from {notebook}")
    download = page.request.get(notebook)
    assert download.status == 200 and download.json()["nbformat"] == 4
    expect(toggle(ui)).to_have_attribute("aria-expanded", "true")
    shown = box(main)
    assert shown["x"] == NAV_WIDTH and shown["width"] == window_width(ui) - NAV_WIDTH, shown

    # ☰ hides it: the page takes the whole width (up to its own max-width), not a 64 px sliver.
    toggle(ui).click()
    expect(navigation(ui)).to_be_hidden()
    expect(toggle(ui)).to_have_attribute("aria-expanded", "false")
    hidden = box(main)
    assert hidden["x"] == 0 and hidden["width"] == min(window_width(ui), MAIN_MAX), hidden
    assert box(main.locator("p").first)["width"] > 600  # the text has the room, not a word a line
    assert page_width(ui) <= DESKTOP[0]
    ui.shoot("jobs-navigation-hidden")

    # The choice survives a reload, and the page keeps the whole width.
    page.reload()
    expect(page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    expect(navigation(ui)).to_be_hidden()
    assert box(main)["width"] == min(window_width(ui), MAIN_MAX)

    # Ctrl+B shows it again, and hides it; ☰ shows it again.
    page.keyboard.press("Control+b")
    expect(navigation(ui)).to_be_visible()
    assert box(main)["x"] == NAV_WIDTH
    page.keyboard.press("Control+b")
    expect(navigation(ui)).to_be_hidden()
    assert box(main)["x"] == 0
    toggle(ui).click()
    expect(navigation(ui)).to_be_visible()
    assert box(main) == shown

    # On a phone the page is 390 px wide with the navigation open over it or folded away.
    at(ui, PHONE)
    page.reload()
    expect(page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    expect(navigation(ui)).to_be_hidden()  # folded on a phone
    assert box(main)["x"] == 0 and box(main)["width"] == window_width(ui)
    toggle(ui).click()
    expect(navigation(ui)).to_be_visible()
    assert box(main)["width"] == window_width(ui) and page_width(ui) == window_width(ui)
    ui.page.screenshot(path=str(ui.folder / "jobs-navigation-open-390.png"), full_page=True)
    toggle(ui).click()
    expect(navigation(ui)).to_be_hidden()
    assert box(main)["width"] == window_width(ui) and page_width(ui) == window_width(ui)
    at(ui, DESKTOP)
    ui.check()


# -- 2. Page not found ------------------------------------------------------------------------------

def test_an_address_that_no_page_has_shows_the_apps_page(app: App, new_ui: Any) -> None:
    # Signed out: the public frame, 404, and Sign in.
    visitor: UI = new_ui()
    page = visitor.page
    answer = visitor.open_missing("no-such-page")
    assert answer.headers["content-type"].startswith("text/html")
    expect(page.get_by_role("heading", name="Page not found", exact=True)).to_be_visible()
    expect(page.get_by_text("The App has no page at /no-such-page.")).to_be_visible()
    expect(page).to_have_title("Page not found · ACS Infra")
    expect(navigation(visitor)).to_have_count(0)
    visitor.shoot("not-found-signed-out")
    page.get_by_role("link", name="Sign in", exact=True).click()
    expect(page).to_have_url(re.compile(rf"{PREFIX}/sign-in$"))
    expect(page.get_by_role("button", name="Sign in", exact=True)).to_be_visible()

    # The API's routes keep the spec's JSON 404, in a browser too.
    for path in ("v1/no-such-route", "account/no-such-route", "app-static/js/no-such-file.js"):
        answer = visitor.open_missing(path)
        assert answer.headers["content-type"] == "application/json", path
        error = answer.json()["error"]
        assert error == {"message": f"No route has the path {PREFIX}/{path}.", "type": "invalid_request_error",
                         "param": None, "code": None}, error
    visitor.check()

    # Signed in: the App's frame with its navigation, and Open Usage.
    ui: UI = new_ui()
    ui.first_sign_in(app.approved_user("lost"))
    page = ui.page
    ui.open_missing("usage/no-such-part")
    expect(page.get_by_role("heading", name="Page not found", exact=True)).to_be_visible()
    expect(navigation(ui)).to_be_visible()
    expect(page.get_by_text("The App has no page at /usage/no-such-part.")).to_be_visible()
    ui.shoot("not-found-signed-in")
    page.get_by_role("link", name="Open Usage", exact=True).click()
    expect(page).to_have_url(re.compile(rf"{PREFIX}/usage$"))
    expect(page.get_by_role("heading", name="Usage", exact=True)).to_be_visible()
    ui.check()


# -- 3. A long name ---------------------------------------------------------------------------------

LONG_NAME = ("Wolfeschlegelsteinhausenbergerdorff" * 6)[:200]  # the most a name may hold, no space to wrap at


def test_a_long_name_keeps_the_phone_layout(app: App, new_ui: Any) -> None:
    user = app.approved_user("a-rather-long-address-for-the-layout-of-a-phone", name=LONG_NAME)
    ui: UI = new_ui()
    page = ui.page
    at(ui, PHONE)
    ui.first_sign_in(user)
    account = page.get_by_role("button", name=f"{LONG_NAME}: account menu", exact=True)  # the whole name
    for path, title in (("usage", "Usage"), ("api-keys", "API Keys"), ("profile", "Profile"), ("jobs", "Jobs"),
                        ("usage/request", "Request more tokens"), ("no-such-page", "Page not found")):
        ui.open_missing(path) if title == "Page not found" else ui.open(path)
        expect(page.get_by_role("heading", name=title, exact=True)).to_be_visible()
        page.wait_for_load_state("networkidle")
        assert page_width(ui) == window_width(ui), (path, page_width(ui))
        toggle(ui).click()  # the navigation open, with the name in it
        expect(account).to_be_visible()
        assert page_width(ui) == window_width(ui), (path, "navigation open", page_width(ui))
        assert box(account)["x"] + box(account)["width"] <= PHONE[0]
    expect(account).to_have_attribute("title", LONG_NAME)  # the whole name on hover too
    ui.page.screenshot(path=str(ui.folder / "long-name-navigation-390.png"), full_page=True)

    # Profile shows the whole name and email, wrapped inside the page.
    ui.open("profile")
    facts = page.locator("dl.facts")
    expect(facts.get_by_text(LONG_NAME, exact=True)).to_be_visible()
    expect(facts.get_by_text(user.email, exact=True)).to_be_visible()
    assert page_width(ui) == window_width(ui)
    assert box(facts)["x"] + box(facts)["width"] <= PHONE[0]
    ui.shoot("profile-long-name")

    # At a desktop the name is cut to the navigation's width, the whole of it still the button's name.
    at(ui, DESKTOP)
    ui.open("usage")
    expect(account).to_be_visible()
    assert box(account)["width"] <= NAV_WIDTH and page_width(ui) == window_width(ui)
    ui.shoot("usage-long-name")
    ui.check()


# -- 4. A failed submit -----------------------------------------------------------------------------

def expect_first_error(ui: UI, control: Any) -> None:
    """The control (a field, or the form's message) has the focus, and is in view with its field."""
    expect(control).to_be_focused()
    whole = control.locator("xpath=ancestor-or-self::*[contains(@class, 'field') or contains(@class, 'form-error')][1]")
    assert in_view(ui, whole), f"{control} is focused but not in view"


def test_a_failed_submit_takes_the_user_to_the_first_error(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    page = ui.page

    # Apply on a phone: Name left empty, far above the button; the button's click brings the Name back.
    at(ui, PHONE)
    ui.open("apply")
    page.get_by_label("Email", exact=True).fill(app.new_email("focus"))
    page.get_by_label("Organization", exact=True).fill("ACS tests")
    page.get_by_label("Planned usage", exact=True).fill("Tests of the App's forms.")
    page.get_by_label("I agree to these rules.").check()
    apply = page.get_by_role("button", name="Apply for access", exact=True)
    apply.click()
    expect(page.get_by_text("Enter your name.")).to_be_visible()
    expect_first_error(ui, page.get_by_label("Name", exact=True))
    ui.page.screenshot(path=str(ui.folder / "apply-first-error-390.png"))  # the window, as the User sees it

    # At a desktop, an empty form: the first field in error is Email.
    at(ui, DESKTOP)
    ui.open("apply")
    page.get_by_role("button", name="Apply for access", exact=True).click()
    expect_first_error(ui, page.get_by_label("Email", exact=True))

    # Choose a new password: the API's refusal of a short one lands on the field.
    user = app.approved_user("focus")
    since = app.mailbox.mark()
    with app.account() as http:
        assert http.post("/account/password-links", json={"email": user.email}).status_code == 200
    page.goto(app.mailbox.wait_for(user.email, "Reset your password", since=since).link("Choose a new password"))
    page.get_by_label("New password", exact=True).fill("short")
    page.get_by_role("button", name="Set the new password", exact=True).click()
    expect(page.get_by_text("Enter a password of at least 8 characters.")).to_be_visible()
    expect_first_error(ui, page.get_by_label("New password", exact=True))

    # Sign in: a refusal with no field (the form's message) takes the focus itself.
    ui.open("sign-in")
    ui.sign_in(user, password="not the password")
    message = page.get_by_text("The email or password is not right.")
    expect_first_error(ui, message)
    ui.shoot("sign-in-first-error")

    # Request more tokens on a phone, signed in: below the sticky top bar.
    ui.sign_in(user)
    expect(page).to_have_url(re.compile(rf"{PREFIX}/api-keys$"))
    at(ui, PHONE)
    ui.open("usage/request")
    page.get_by_label("Project", exact=True).fill("Layout tests")
    page.get_by_label("Planned usage", exact=True).fill("None: the form's errors.")
    page.get_by_role("button", name="Send request", exact=True).click()
    expect(page.get_by_text("Write the tokens as a number, such as 50K or 2.5M.")).to_be_visible()
    expect_first_error(ui, page.get_by_label("Tokens", exact=True))
    ui.page.screenshot(path=str(ui.folder / "token-request-first-error-390.png"))
    at(ui, DESKTOP)

    # A dialog of API Keys: a name in use, refused by the API, lands on Name.
    ui.open("api-keys")
    for attempt in range(2):
        page.get_by_role("button", name="New key", exact=True).click()
        dialog = page.get_by_role("dialog")
        dialog.get_by_label("Name", exact=True).fill("laptop")
        dialog.get_by_role("button", name="Create key", exact=True).click()
        if attempt == 0:  # made: copy it and close
            copy = page.get_by_role("dialog", name="Copy your key")
            copy.get_by_role("button", name="Copy", exact=True).click()
            copy.get_by_role("button", name="Done", exact=True).click()
            expect(copy).to_be_hidden()
    dialog = page.get_by_role("dialog", name="New key")
    expect(dialog.get_by_text("You have a key named 'laptop' already.", exact=False)).to_be_visible()
    expect_first_error(ui, dialog.get_by_label("Name", exact=True))
    ui.shoot("api-keys-name-in-use")
    ui.check()
