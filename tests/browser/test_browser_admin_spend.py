"""Admin's Spend tab and Models tab in a real browser (spec: "Watch the spend", "Keep a model Warm",
"Spend limit"): an admin Locks the Spend stop with a reason, and the API pauses new GPU work (429
spend_cap); Clear lifts it, and the Changes of the stop list both with who made them. On Models, an
admin adds a warm window and reads its cost a week, keeps a model Warm now for 2 hours with its cost,
and Removes a window whose confirmation says what it costs. axe-core at 1280 and 390 px.

The test profile's models run on the CPU, so their GPUs cost $0.00: the costs that the tab shows are
the API's own, and the arithmetic of a priced model is tests/unit/test_spend_tab.py's."""
from __future__ import annotations

import re
import time
from datetime import date, datetime, timedelta, timezone
from datetime import time as dt_time
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import App, UI
from tests.browser.page_calls import ok

SPEND_TAB = "admin?tab=analytics&view=spend"
REASON = "GPU bill over plan"


def signed_in_admin(app: App, new_ui: Any, tag: str) -> UI:
    admin = app.approved_admin(tag, f"Admin {tag.title()}")
    ui: UI = new_ui()
    ui.first_sign_in(admin)
    return ui


def v1_status(app: App, key: str, expected: int, timeout_s: float = 15.0) -> dict:
    """What /v1/completions answers the key, once it answers `expected`: each ingress reads the stop
    at most once a second (DESIGN: the stop may take a second or two to apply or lift)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status, error = app.v1_error(key)
        if status == expected or time.monotonic() > deadline:
            assert status == expected, (status, error)
            return error
        time.sleep(0.5)


def fits_a_phone(ui: UI) -> None:
    """At 390 px nothing reaches past the page's right edge (a wide table scrolls in its own box)."""
    page = ui.page
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(150)
    wider = page.evaluate("""() => {
        const width = document.documentElement.clientWidth;
        // The outermost of what reaches past the edge: its parent keeps within the page, and does not
        // scroll it in a box of its own (a table's box, the tabs' row).
        const wide = [...document.querySelectorAll("body *")].filter((node) => {
            const box = node.getBoundingClientRect();
            const parent = node.parentElement;
            return box.width && box.right > width + 1 && parent.getBoundingClientRect().right <= width + 1
                && getComputedStyle(parent).overflowX === "visible";
        }).slice(0, 8).map((node) => `${node.tagName.toLowerCase()}.${node.className} ${Math.round(node.getBoundingClientRect().right)}`);
        const page = document.documentElement.scrollWidth;
        // What overflows its own box past the edge (a line that does not wrap, a child placed outside).
        const spill = [...document.querySelectorAll("body *")].filter((node) => {
            const box = node.getBoundingClientRect();
            return getComputedStyle(node).overflowX === "visible" && box.left + node.scrollWidth > width + 1
                && !node.closest(".table-scroll");
        }).slice(-6).map((node) => `${node.tagName.toLowerCase()}.${node.className} spills to ${Math.round(node.getBoundingClientRect().left + node.scrollWidth)}`);
        return page > width ? [`the page is ${page} px wide`, ...wide, ...spill] : wide;
    }""")
    page.set_viewport_size({"width": 1280, "height": 800})
    assert wider == [], wider


def open_spend(ui: UI) -> Any:
    page = ui.page
    ui.open(SPEND_TAB)
    expect(page.get_by_role("heading", name="Spend stop", exact=True)).to_be_visible()
    return page


def test_lock_with_a_reason_pauses_gpu_work_and_clear_lifts_it(app: App, new_ui: Any) -> None:
    ui = signed_in_admin(app, new_ui, "spendlock")
    page = ui.page
    key = ok(page, "POST", "account/keys", {"name": "spend"}, status=201)["key"]
    page = open_spend(ui)
    # The top: the last 24 hours with the amounts that warn and pause, the spend since the last Clear,
    # and when Inference last counted.
    top = page.locator(".spend-top")
    expect(top).to_contain_text("Last 24 hours")
    expect(top).to_contain_text(re.compile(r"Warns the team at \$1,000\.00 and \$2,000\.00\. Pauses new GPU work at \$3,000\.00\."))
    expect(top).to_contain_text("Since the last Clear")
    expect(top).to_contain_text("Inference last counted")
    for part in ("Last 24 hours by model", "GPU spend per day", "Who used each model, last 48 hours",
                 "Changes of the stop"):
        expect(page.get_by_role("heading", name=part, exact=True)).to_be_visible()
    ui.shoot("spend")

    try:
        page.get_by_role("button", name="Lock", exact=True).click()
        dialog = page.get_by_role("dialog", name="Lock the Spend stop")
        expect(dialog).to_be_visible()
        dialog.get_by_label("Reason").fill(REASON)
        ui.shoot("spend-lock-dialog")
        dialog.get_by_role("button", name="Lock", exact=True).click()
        expect(dialog).to_be_hidden()
        expect(page.get_by_text("New GPU work is paused.")).to_be_visible()
        changes = page.get_by_role("table", name="Changes of the stop")
        expect(changes.locator("tbody tr").first).to_contain_text("Lock")
        expect(changes.locator("tbody tr").first).to_contain_text(REASON)
        expect(changes.locator("tbody tr").first).to_contain_text("Admin Spendlock")
        expect(page.locator(".spend-stop")).to_contain_text(f"Last change: Lock by Admin Spendlock")
        # The API pauses new GPU work: 429 spend_cap.
        assert v1_status(app, key, 429)["code"] == "spend_cap"
        ui.shoot("spend-locked")
        fits_a_phone(ui)

        page.get_by_role("button", name="Clear", exact=True).click()
        confirm = page.get_by_role("dialog", name="Clear the Spend stop?")
        expect(confirm).to_contain_text("New GPU work runs again")
        confirm.get_by_role("button", name="Clear", exact=True).click()
        expect(confirm).to_be_hidden()
        expect(page.get_by_text("New GPU work runs.")).to_be_visible()
        rows = changes.locator("tbody tr")
        expect(rows.nth(0)).to_contain_text("Clear")
        expect(rows.nth(0)).to_contain_text("Admin Spendlock")
        expect(rows.nth(1)).to_contain_text("Lock")
        v1_status(app, key, 200)  # new GPU work runs again
        ui.shoot("spend-cleared")
    finally:
        ok(page, "POST", "v1/admin/spend/clear", {})  # the stack is the package's: leave GPU work running
    ui.check()


# Three days of GPU spend for the chart, put in the ledger as the sampler writes it (the test profile's CPU
# models cost nothing): a week ago, so that the last 24 hours, the stop and the warn amounts see none of it.
# Models that the profile does not serve are named by their ids.
SAMPLES = {0: {"llama-405b": 871.68, "llama-8b": 46.8}, 2: {"llama-8b": 1.95}}


def shown_day(value: date) -> str:
    return f"{value.day} {value:%b} {value.year}"


def seed_spend(app: App, first: date) -> None:
    from sqlalchemy import delete

    from ledger.tokens.tables import SpendSample

    async def seed(session: Any) -> None:
        start = datetime.combine(first, dt_time(), tzinfo=timezone.utc)
        models = {model for day in SAMPLES.values() for model in day}
        await session.exec(delete(SpendSample).where(SpendSample.at >= start, SpendSample.at < start + timedelta(days=3),
                                                     SpendSample.model_id.in_(models)))  # type: ignore[attr-defined]
        for offset, spent in SAMPLES.items():
            for model, usd in spent.items():
                session.add(SpendSample(at=start + timedelta(days=offset, hours=12), model_id=model, replicas=1,
                                        gpus=1.0, seconds=60.0, usd=usd))
        await session.commit()

    app.serve.read_ledger(seed)


def test_gpu_spend_per_day_reads_by_keyboard_and_as_a_table(app: App, new_ui: Any) -> None:
    ui = signed_in_admin(app, new_ui, "spendchart")
    page = ui.page
    first = datetime.now(timezone.utc).date() - timedelta(days=7)
    last = first + timedelta(days=2)
    seed_spend(app, first)
    ui.open(f"{SPEND_TAB}&from={first}&to={last}")
    expect(page.get_by_text(f"{shown_day(first)} to {shown_day(last)}, the models that cost the most.")).to_be_visible()
    chart = page.get_by_role("group", name=re.compile("^GPU spend per day"))
    readout = page.locator(".spend-parts .readout")
    chart.focus()
    page.keyboard.press("Home")
    expect(readout).to_have_text(f"{shown_day(first)}: $918.48, llama-405b $871.68, llama-8b $46.80")
    page.keyboard.press("End")
    expect(readout).to_have_text(f"{shown_day(last)}: $1.95, llama-8b $1.95")
    page.keyboard.press("ArrowLeft")
    expect(readout).to_have_text(f"{shown_day(first + timedelta(days=1))}: $0.00")
    expect(page.locator(".spend-parts .legend")).to_have_text(re.compile(r"llama-405b\s+llama-8b"))
    page.get_by_role("button", name="View as table").click()
    table = page.get_by_role("table", name="GPU spend per day")
    expect(table.get_by_role("columnheader")).to_have_text(["Day", "llama-405b", "llama-8b"])
    expect(table.locator("tbody tr")).to_have_text([
        re.compile(rf"{shown_day(first)}\s*\$871\.68\s*\$46\.80"),
        re.compile(rf"{shown_day(last)}\s*\$0\.00\s*\$1\.95")])
    ui.shoot("spend-chart")
    ui.check()


def model_actions(page: Any, model: str) -> None:
    page.get_by_role("button", name=f"Actions of {model}", exact=True).click()


def test_a_warm_window_with_its_cost_warm_now_and_remove(app: App, new_ui: Any) -> None:
    ui = signed_in_admin(app, new_ui, "warm")
    page = ui.page
    ui.open("admin?tab=models")
    models = page.get_by_role("table", name="Models")
    expect(models).to_be_visible()
    # The App names a model by its short name, its id on hover (components/model_name.js).
    actions = models.get_by_role("button", name=re.compile("^Actions of ")).first
    model = (actions.get_attribute("aria-label") or "").removeprefix("Actions of ")
    for column in ("Floor", "Next 7 days"):
        expect(models.get_by_role("columnheader", name=column)).to_be_visible()
    ui.shoot("models")

    # Add a window: days, From, To, Time zone (UTC at first), and what it costs a week, shown live.
    model_actions(page, model)
    page.get_by_role("menuitem", name="Add a window").click()
    dialog = page.get_by_role("dialog", name=f"Add a window for {model}")
    expect(dialog.get_by_label("Time zone")).to_have_value("UTC")
    dialog.get_by_label("Saturday").check()
    dialog.get_by_label("From").fill("25:00")
    dialog.get_by_role("button", name="Add window").click()
    expect(dialog.get_by_label("From")).to_be_focused()  # the App writes 24-hour times, and says so
    expect(dialog.get_by_text("Write a time of the 24-hour clock, such as 08:30.")).to_be_visible()
    dialog.get_by_label("From").fill("22:00")
    dialog.get_by_label("To").fill("6:00")
    expect(dialog.get_by_text("It ends at 06:00 the next day.")).to_be_visible()  # a window that ends before its start
    # Six days of 8 hours: 48 hours a week, at the model's price of a Warm hour.
    expect(dialog.locator(".warm-cost")).to_contain_text(re.compile(r"Costs \$[\d,]+\.\d\d a week: 48 hours at \$[\d,]+\.\d\d an hour\."))
    ui.shoot("models-add-window")
    dialog.get_by_role("button", name="Add window").click()
    expect(dialog).to_be_hidden()
    windows = page.get_by_role("table", name="Warm windows")
    row = windows.locator("tbody tr", has_text="22:00 to 06:00 the next day UTC")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("Mon, Tue, Wed, Thu, Fri, Sat")
    expect(row).to_contain_text(re.compile(r"\$[\d,]+\.\d\d a week"))

    # Warm now for 2 hours, with its cost.
    model_actions(page, model)
    page.get_by_role("menuitem", name="Warm now").click()
    warm = page.get_by_role("dialog", name=f"Warm {model} now")
    warm.get_by_label("Hours").fill("2")
    expect(warm.locator(".warm-cost")).to_contain_text(re.compile(r"Costs \$[\d,]+\.\d\d: 2 hours at \$[\d,]+\.\d\d an hour\."))
    warm.get_by_label("Hours").fill("25")
    expect(warm.locator(".warm-cost")).to_have_text("Enter the hours to see what it costs.")
    warm.get_by_role("button", name="Warm now").click()
    expect(warm.get_by_text("Enter a whole number of hours from 1 to 24.")).to_be_visible()
    warm.get_by_label("Hours").fill("2")
    ui.shoot("models-warm-now")
    warm.get_by_role("button", name="Warm now").click()
    expect(warm).to_be_hidden()
    now_row = windows.locator("tbody tr", has_text="Warm now, until")
    expect(now_row).to_have_count(1)
    expect(now_row).to_contain_text(re.compile(r"\$[\d,]+\.\d\d for 2 hours"))
    expect(models.locator("tbody tr", has_text=model).first).to_contain_text("Warm")
    ui.shoot("models-windows")
    fits_a_phone(ui)

    # Remove: the confirmation shows what the window costs.
    for target, cost, shot in (
            (row, r"It costs \$[\d,]+\.\d\d a week, \$[\d,]+\.\d\d in the next 7 days\.", "models-remove"),
            (now_row, r"It costs \$[\d,]+\.\d\d for its 2 hours", None)):
        target.get_by_role("button", name=re.compile("^Actions of the window")).click()
        page.get_by_role("menuitem", name="Remove").click()
        confirm = page.get_by_role("dialog", name="Remove this window?")
        expect(confirm).to_contain_text(re.compile(cost))
        if shot:
            ui.shoot(shot)
        confirm.get_by_role("button", name="Remove", exact=True).click()
        expect(confirm).to_be_hidden()
        expect(target).to_have_count(0)
    windows_left = ok(page, "GET", "v1/admin/warm-windows")["windows"]
    assert not [window for window in windows_left if window["created_by"] == "Admin Warm"]
    ui.check()
