"""The App's pages under their Content-Security-Policy in a real browser (issue 33, finding 10):
every page works, signed out and signed in, with no violation and no console error (new_ui's
watch fails a test on either, and on a page without its security headers); and the policy does
block what it does not list, and the tests see it."""
from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from api.webapp.router import PAGES
from tests.browser.conftest import App, UI

# What the App's own code never does: an inline script, and an inline style attribute.
INJECT = """() => new Promise((resolve) => {
    const script = document.createElement("script");
    script.textContent = "window.acsInlineRan = true;";
    document.head.append(script);
    document.body.setAttribute("style", "background-color: rgb(255, 0, 0)");
    setTimeout(() => resolve({ran: window.acsInlineRan === true,
                               background: getComputedStyle(document.body).backgroundColor}), 200);
})"""


def visit_every_page(ui: UI) -> None:
    """Open each page path of the App and wait until its page is drawn and has stopped loading."""
    page = ui.page
    for path in PAGES:
        ui.open(path)
        expect(page.locator("h1:not(.visually-hidden)").first).to_be_visible()
        page.wait_for_load_state("networkidle")


def test_every_page_works_under_the_policy(app: App, new_ui: Any) -> None:
    visitor: UI = new_ui()
    visit_every_page(visitor)
    visitor.check()

    ui: UI = new_ui()
    user = app.approved_user("csp")
    ui.first_sign_in(user)
    visit_every_page(ui)
    ui.open("usage")
    expect(ui.page.get_by_role("meter").first).to_be_visible()  # its fill's width is set through CSSOM
    ui.shoot("usage-under-the-policy")
    ui.check()


def wait_for_errors(ui: UI, count: int) -> None:
    """The violations arrive through a binding, a moment after the page saw them."""
    for _ in range(50):
        if len(ui.errors) >= count:
            return
        ui.page.wait_for_timeout(100)


def test_the_policy_blocks_inline_code_and_the_tests_see_it(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    page = ui.open("sign-in")
    expect(page.get_by_role("button", name="Sign in", exact=True)).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert ui.errors == []

    result = page.evaluate(INJECT)
    assert result == {"ran": False, "background": "rgba(0, 0, 0, 0)"}
    wait_for_errors(ui, 2)
    violations = [error for error in ui.errors if error.startswith("CSP violation")]
    assert any("script-src-elem blocked 'inline'" in error for error in violations), ui.errors
    assert any("style-src-attr blocked 'inline'" in error for error in violations), ui.errors
    ui.errors.clear()  # expected here: every other test fails on them
    ui.check()
