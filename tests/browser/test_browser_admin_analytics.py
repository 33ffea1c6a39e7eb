"""Admin's Analytics tab in a real browser (spec: "Read the platform's analytics"): an admin opens
Analytics, which counts this month; the tabs Users, Budget, Platform, Usage and Spend switch by
keyboard, and the address keeps the tab and the days, so a reload opens the same; the days are
chosen as on Usage, by a range or the calendar. Users, Budget and Platform end with Definitions and
list Daily numbers; Platform's chart reads by keyboard and as a table. The team's accounts (admins)
are not counted among Users: a new admin and an admin's Completion change no number about Users,
while a new User and their Completion do. Usage's All Users and All models count one User or one
model, and name the model by its short name with its id on hover, as the User's own Usage page and
the Playground do (spec: "The App names each model by a short name ... The model's full id shows
when you hover over its name"). axe-core at 1280 and 390 px.

The stack is the package's, shared with other modules' Users: the test reads the numbers before and
after what it does, and checks the difference and that the page shows the API's numbers."""
from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import App, UI, tab_to
from tests.browser.page_calls import ok

# The test profile's model: its id, and its short name (its served name, acs/tiny-llama-random, after
# the maker, dashes as spaces).
MODEL, SHORT = "tiny-llama", "tiny llama random"


def shown_day(value: date) -> str:
    """A day as the App writes it: 4 Dec 2026."""
    return f"{value.day} {value:%b} {value.year}"


def users_today(ui: UI) -> tuple[dict, dict]:
    """The Users tab as the API counts it (this month), and its Daily numbers of today."""
    tab = ok(ui.page, "GET", "v1/admin/analytics/users")
    today = datetime.now(timezone.utc).date().isoformat()
    return tab, next(row for row in tab["daily"] if row["day"] == today)


def signed_in(app: App, new_ui: Any, user: Any) -> UI:
    ui: UI = new_ui()
    ui.first_sign_in(user)
    return ui


def daily_row(page: Any, when: date) -> Any:
    return page.get_by_role("table", name="Daily numbers").get_by_role("row").filter(
        has=page.get_by_role("cell", name=shown_day(when), exact=True))


def selected(page: Any, name: str) -> Any:
    return page.get_by_role("tablist", name="Analytics").get_by_role("tab", name=name, exact=True)


def test_analytics_tabs_days_and_the_teams_accounts(app: App, new_ui: Any) -> None:
    admin = app.approved_admin("analytics", "Admin Analytics")
    ui = signed_in(app, new_ui, admin)
    page = ui.page
    today = datetime.now(timezone.utc).date()
    admins_key = ok(page, "POST", "account/keys", {"name": "team"}, status=201)["key"]

    # The team's accounts are left out: another admin joins and an admin runs a Completion, and no
    # number about Users moves; a User joins and runs one, and the new and active Users grow by one.
    before, before_today = users_today(ui)
    app.approved_admin("analyticsteam", "Admin Team")
    app.completion(admins_key)
    team, team_today = users_today(ui)
    assert (team["users"], team["new_users"], team_today["active_users"]) == (
        before["users"], before["new_users"], before_today["active_users"])
    user = app.approved_user("analyticsuser", "Analytics User")
    user_ui = signed_in(app, new_ui, user)
    app.completion(ok(user_ui.page, "POST", "account/keys", {"name": "probe"}, status=201)["key"])
    after, after_today = users_today(ui)
    assert (after["users"], after["new_users"], after["new_users_active_within_24h"], after_today["active_users"]) == (
        before["users"] + 1, before["new_users"] + 1, before["new_users_active_within_24h"] + 1,
        before_today["active_users"] + 1)

    # Admin, then Analytics: Users first, this month up to today, with the API's numbers.
    ui.open("admin")
    page.get_by_role("tab", name="Analytics", exact=True).click()
    expect(page).to_have_url(re.compile(r"/admin\?tab=analytics$"))
    expect(selected(page, "Users")).to_have_attribute("aria-selected", "true")
    expect(page.get_by_text(f"{shown_day(today.replace(day=1))} to {shown_day(today)}, in UTC days")).to_be_visible()
    new_users = page.locator(".stat").filter(has=page.get_by_role("heading", name="New Users", exact=True))
    expect(new_users.locator(".big")).to_have_text(f"{after['new_users']:,}")
    expect(new_users).to_contain_text(f"of {after['users']:,} Users")
    row = daily_row(page, today).get_by_role("cell")
    expect(row.nth(1)).to_have_text(f"{after_today['new_users']:,}")
    expect(row.nth(3)).to_have_text(f"{after_today['active_users']:,}")
    expect(page.get_by_role("heading", name="Definitions", exact=True)).to_be_visible()
    expect(page.locator(".definitions")).to_contain_text("Admins. They are left out of every number about Users")
    ui.shoot("analytics-users")

    # The tabs by keyboard: the arrow moves to Budget, and the address keeps it.
    tab_to(page, selected(page, "Users"))
    page.keyboard.press("ArrowRight")
    expect(selected(page, "Budget")).to_be_focused()
    expect(selected(page, "Budget")).to_have_attribute("aria-selected", "true")
    expect(page).to_have_url(re.compile(r"tab=analytics&view=budget"))
    expect(page.get_by_role("heading", name="Closest to their allowance", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Definitions", exact=True)).to_be_visible()
    expect(page.get_by_role("table", name="Daily numbers").locator("tbody tr")).to_have_count(today.day)

    # The days, as on Usage: Last 7 days, kept in the address with the tab; a reload opens the same.
    page.get_by_role("group", name="Days").get_by_role("button", name="Last 7 days", exact=True).click()
    expect(page).to_have_url(re.compile(r"tab=analytics&view=budget&range=last_7_days$"))
    expect(page.get_by_text(f"{shown_day(today - timedelta(days=6))} to {shown_day(today)}, in UTC days")).to_be_visible()
    page.reload()
    expect(selected(page, "Budget")).to_have_attribute("aria-selected", "true")
    expect(page.get_by_role("button", name="Last 7 days", exact=True)).to_have_attribute("aria-pressed", "true")
    expect(page.get_by_role("table", name="Daily numbers").locator("tbody tr")).to_have_count(7)
    ui.shoot("analytics-budget")

    # Platform: the requests of each day, its chart read by keyboard, then as a table.
    tab_to(page, selected(page, "Budget"))
    page.keyboard.press("ArrowRight")
    expect(selected(page, "Platform")).to_have_attribute("aria-selected", "true")
    expect(page).to_have_url(re.compile(r"tab=analytics&view=platform&range=last_7_days$"))
    platform = ok(page, "GET", f"v1/admin/analytics/platform?from={today - timedelta(days=6)}&to={today}")
    ended = platform["daily"][-1]
    assert ended["completed"] >= 2  # the admin's and the User's Completions at least
    for part in ("Requests per day", "By source", "By model", "Users of each hour", "Daily numbers", "Definitions"):
        expect(page.get_by_role("heading", name=part, exact=True)).to_be_visible()
    # The server errors and the timeouts of the days: the API's own count, today's row of Daily numbers.
    daily = page.get_by_role("table", name="Daily numbers")
    for column in ("Server errors", "Timeouts"):
        expect(daily.get_by_role("columnheader", name=column, exact=True)).to_be_visible()
    today_row = daily.get_by_role("row").filter(has_text=shown_day(today)).get_by_role("cell")
    expect(today_row.nth(5)).to_have_text(f"{ended['server_errors']:,}")  # Day, Requests, Completed, Failed,
    expect(today_row.nth(6)).to_have_text(f"{ended['timeouts']:,}")       # Stopped, Server errors, Timeouts
    chart = page.get_by_role("group", name=re.compile(r"^Requests per day\. Use the left and right arrow keys"))
    tab_to(page, chart)
    page.keyboard.press("End")
    expect(page.locator(".chart .readout")).to_have_text(
        f"{shown_day(today)}: {ended['completed']:,} completed, {ended['failed']:,} failed and {ended['stopped']:,} stopped")
    page.keyboard.press("Home")
    expect(page.locator(".chart .readout")).to_contain_text(shown_day(today - timedelta(days=6)))
    page.get_by_role("button", name="View as table", exact=True).click()
    as_table = page.get_by_role("table", name="Requests per day")
    expect(as_table.get_by_role("row").filter(has_text=shown_day(today))).to_contain_text(f"{ended['completed']:,}")
    by_model = page.get_by_role("region", name="By model")
    expect(by_model.get_by_title(MODEL, exact=True)).to_have_text(SHORT)
    hours = page.get_by_role("table", name="Users of each hour, in five time zones")
    for zone in ("Los Angeles", "New York", "UTC", "Berlin", "Tokyo"):
        expect(hours.get_by_role("columnheader", name=zone, exact=True)).to_be_visible()
    expect(hours.locator("tbody tr")).to_have_count(24)
    ui.shoot("analytics-platform")

    # The calendar's days, as on Usage: a first and a last day, then Apply; the address keeps them.
    page.get_by_role("button", name="Calendar", exact=True).click()
    page.get_by_label("First day", exact=True).fill(shown_day(today - timedelta(days=2)))
    page.get_by_label("Last day", exact=True).fill(shown_day(today))
    page.get_by_role("button", name="Apply", exact=True).click()
    expect(page).to_have_url(re.compile(
        rf"tab=analytics&view=platform&from={today - timedelta(days=2)}&to={today}$"))
    expect(page.get_by_role("table", name="Daily numbers").locator("tbody tr")).to_have_count(3)

    # Usage: All Users and All models count one User or one model; a model is named by its short name.
    selected(page, "Usage").click()
    expect(page).to_have_url(re.compile(rf"view=usage&from={today - timedelta(days=2)}&to={today}$"))
    expect(page.get_by_role("heading", name="Definitions", exact=True)).to_have_count(0)
    users = page.get_by_label("User", exact=True)
    expect(users.get_by_role("option", name=user.name, exact=True)).to_have_count(1)
    expect(users.get_by_role("option", name=admin.name, exact=True)).to_have_count(1)  # Usage counts every token
    users.select_option(label=user.name)
    expect(page).to_have_url(re.compile(r"view=usage&from=[-\d]+&to=[-\d]+&user=[0-9a-f-]{36}$"))
    by_user = page.get_by_role("table", name="By User").locator("tbody tr")
    expect(by_user).to_have_count(1)
    expect(by_user).to_contain_text(user.name)
    newest = page.get_by_role("table", name="Completions, newest 100").locator("tbody tr")
    expect(newest).to_have_count(1)
    expect(newest.get_by_title(MODEL, exact=True)).to_have_text(SHORT)
    models = page.get_by_label("Model", exact=True)
    expect(models.get_by_role("option", name=SHORT, exact=True)).to_have_count(1)
    models.select_option(MODEL)
    expect(page).to_have_url(re.compile(rf"&user=[0-9a-f-]{{36}}&model={MODEL}$"))
    expect(models).to_have_attribute("title", MODEL)
    expect(newest).to_have_count(1)
    ui.shoot("analytics-usage")

    # Spend: the Spend tab's own parts, over the same days (admin/spend.js).
    selected(page, "Spend").click()
    expect(page).to_have_url(re.compile(rf"view=spend&from={today - timedelta(days=2)}&to={today}$"))
    expect(page.get_by_role("heading", name="Spend stop", exact=True)).to_be_visible()
    ui.check()

    # The same name on the User's own Usage page: the Model filter and the tables name the model by its
    # short name, the id on hover (before, the filter said the served name and the tables the id).
    user_ui.open("usage")
    upage = user_ui.page
    own_models = upage.get_by_label("Model", exact=True)
    expect(own_models.get_by_role("option", name=SHORT, exact=True)).to_have_count(1)
    expect(own_models.get_by_role("option", name="acs/tiny-llama-random", exact=True)).to_have_count(0)
    expect(upage.get_by_role("region", name="By model").get_by_title(MODEL, exact=True)).to_have_text(SHORT)
    expect(upage.get_by_role("region", name="Completions, newest 100").get_by_title(MODEL, exact=True)).to_have_text(SHORT)
    own_models.select_option(MODEL)
    expect(own_models).to_have_attribute("title", MODEL)
    user_ui.check()
