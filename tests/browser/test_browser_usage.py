"""Usage's rough edges of issue 37 in a real browser ("Read your usage", "Manage your keys" in the
spec's docs): the filters on one row with days that read "4 Dec 2026", names cut to one line,
"Last used" read the same on API Keys and Usage, and a failed first read that says so."""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from playwright.sync_api import expect

from api.errors_http import INTERNAL
from tests.browser.conftest import App, UI, tab_to
from tests.browser.page_calls import ok

# 32 characters, the most that a key's name may have: wider than its column at either width.
LONG_NAME = "nightly sweep of steering layers"


def shown_day(value: Any) -> str:
    """A day as the App writes it: 4 Dec 2026."""
    return f"{value.day} {value:%b} {value.year}"


def key_with_a_completion(app: App, ui: UI, name: str) -> None:
    """A key made through the App's own route, and one Completion with it through the API."""
    key = ok(ui.page, "POST", "account/keys", {"name": name}, status=201)["key"]
    app.completion(key)


def one_line(target: Any) -> dict:
    """The element's box and text fit: one line high, and whether its text is cut."""
    return target.evaluate("""element => {
        const style = getComputedStyle(element);
        return {height: element.getBoundingClientRect().height, line: parseFloat(style.lineHeight) ||
                1.5 * parseFloat(style.fontSize), cut: element.scrollWidth > element.clientWidth,
                title: element.title, ellipsis: style.textOverflow};
    }""")


def test_the_filters_keep_to_one_row_and_days_read_as_dates(app: App, new_ui) -> None:
    user = app.approved_user("filters")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(user)
    key_with_a_completion(app, ui, LONG_NAME)
    ui.open("usage")
    expect(page.get_by_role("heading", name="By key", exact=True)).to_be_visible()

    # One toolbar row at 1280 px: the days, the calendar, the key and the model.
    days = page.get_by_role("group", name="Days")
    calendar = page.get_by_role("button", name="Calendar", exact=True)
    keys, models = page.get_by_label("Key", exact=True), page.get_by_label("Model", exact=True)
    boxes = [target.bounding_box() for target in (days, calendar, keys, models)]
    assert all(boxes), boxes
    top, bottom = max(box["y"] for box in boxes), min(box["y"] + box["height"] for box in boxes)
    assert top < bottom, f"the filters take more than one row at 1280 px: {boxes}"
    ui.shoot("usage-filters")

    # Names of keys cut to one line with an ellipsis, the whole name on hover, at both widths.
    by_key = page.get_by_role("region", name="By key")
    recent = page.get_by_role("region", name="Completions, newest 100")
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(150)
        for name in (by_key.get_by_role("button", name=LONG_NAME), recent.get_by_title(LONG_NAME)):
            fit = one_line(name)
            assert fit["height"] < 1.5 * fit["line"], (width, fit)
            assert fit["title"] == LONG_NAME and fit["ellipsis"] == "ellipsis", (width, fit)
    assert one_line(recent.get_by_title(LONG_NAME))["cut"]  # 32 characters do not fit a phone's column
    page.set_viewport_size({"width": 1280, "height": 800})
    page.wait_for_timeout(150)
    # At 1280 px the long name leaves the newest Completions whole: no scrolling sideways.
    assert recent.evaluate("region => region.scrollWidth <= region.clientWidth"), "the Completions scroll at 1280 px"

    # The calendar: days typed and shown as 4 Dec 2026, the arrow keys move a day, Enter applies.
    today = datetime.now(timezone.utc).date()
    first, last = today - timedelta(days=3), today
    tab_to(page, calendar)
    page.keyboard.press("Enter")
    expect(calendar).to_have_attribute("aria-expanded", "true")
    first_day, last_day = page.get_by_label("First day", exact=True), page.get_by_label("Last day", exact=True)
    expect(first_day).to_be_focused()
    page.keyboard.type(shown_day(first))
    page.keyboard.press("Tab")
    expect(last_day).to_be_focused()
    page.keyboard.type(shown_day(last - timedelta(days=1)))
    page.keyboard.press("ArrowUp")
    expect(last_day).to_have_value(shown_day(last))
    # The open panel stays inside the page at 1280 px.
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth"), "the calendar overflows"
    ui.shoot("usage-calendar")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"from={first.isoformat()}&to={last.isoformat()}"))
    expect(page.get_by_text(f"{shown_day(first)} to {shown_day(last)}, in UTC days")).to_be_visible()
    expect(calendar).to_have_attribute("aria-expanded", "false")
    # Opened again, the chosen days read as dates, not the browser's mm/dd/yyyy.
    calendar.click()
    expect(first_day).to_have_value(shown_day(first))
    expect(last_day).to_have_value(shown_day(last))
    # A day that no calendar has: the page says how to write one, and keeps the days chosen.
    first_day.fill(f"31 Feb {today.year}")
    page.get_by_role("button", name="Apply").click()
    expect(page.get_by_role("alert")).to_have_text("Write the first day as a date, such as 4 Dec 2026.")
    expect(first_day).to_have_attribute("aria-invalid", "true")
    ui.shoot("usage-calendar-wrong-day")
    page.keyboard.press("Escape")
    expect(calendar).to_be_focused()
    expect(first_day).to_be_hidden()
    expect(page).to_have_url(re.compile(rf"from={first.isoformat()}&to={last.isoformat()}"))
    ui.check()


def test_last_used_reads_the_same_on_api_keys_and_usage(app: App, new_ui) -> None:
    user = app.approved_user("lastused")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(user)
    key_with_a_completion(app, ui, "laptop")

    def on_api_keys() -> str:
        ui.open("api-keys")
        row = page.get_by_role("row").filter(has=page.get_by_text("laptop", exact=True))
        return row.get_by_role("cell").nth(4).inner_text()  # Name, Status, This month, Budget, Last used

    def on_usage() -> str:
        ui.open("usage")
        row = page.get_by_role("region", name="By key").get_by_role("row").filter(has_text="laptop")
        return row.get_by_role("cell").last.inner_text()  # ..., Budget, Last used

    keys_today, usage_today = on_api_keys(), on_usage()
    assert re.fullmatch(r"\d\d:\d\d UTC", keys_today), keys_today  # a time today, in UTC
    assert keys_today == usage_today, (keys_today, usage_today)
    ui.shoot("usage-last-used-today")

    # The next day in the browser: the same use shows its date on both pages.
    used_on = datetime.now(timezone.utc).date()
    page.clock.set_fixed_time(datetime.now(timezone.utc) + timedelta(days=1))
    keys_later, usage_later = on_api_keys(), on_usage()
    assert keys_later == usage_later == shown_day(used_on), (keys_later, usage_later)
    ui.shoot("usage-last-used-earlier")
    ui.check()


def test_a_failed_first_read_of_usage_says_what_failed(app: App, new_ui) -> None:
    user = app.approved_user("unread")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(user)
    # The App's read of the usage answers the API's 500 until the test lets it through.
    failing = {"on": True}

    def usage_call(route: Any) -> None:
        if not failing["on"]:
            route.continue_()
            return
        route.fulfill(status=500, content_type="application/json", body=json.dumps({
            "error": {"message": INTERNAL, "type": "internal_error", "code": "internal_error", "param": None},
            "request_id": "req_test"}))

    page.route(re.compile(r"/account/usage\?"), usage_call)
    ui.open("usage")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Could not read your usage")
    expect(alert).to_contain_text(INTERNAL)
    expect(page.get_by_role("group", name="Days")).to_have_count(0)  # no filters over nothing
    expect(page.get_by_text("Could not refresh")).to_have_count(0)  # there was nothing to refresh
    try_again = alert.get_by_role("button", name="Try again")
    ui.shoot("usage-first-read-failed")
    # Chromium logs the 500 that the test made; any other console error still fails the test.
    made = [e for e in ui.errors if "status of 500" in e and "/account/usage" in e]
    assert made, ui.errors
    ui.errors = [e for e in ui.errors if e not in made]

    failing["on"] = False
    tab_to(page, try_again)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Tokens used", exact=True)).to_be_visible()
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(page.get_by_role("group", name="Days")).to_be_visible()
    ui.check()
