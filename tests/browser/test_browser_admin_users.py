"""The Admin page's Users tab in a real browser (issue 37, spec "Manage Users", "Act on many Users at once",
"Group Users with tags"): an admin opens Admin, then Users, chooses a Tag (kept in the address), selects
every row with the header box, and uses Selected Users. Suspend leaves the other admin out and says so, and
lists the User that the API refused with its reason; Add tag writes the tag in its one form; Delete needs
`delete N Users` typed before its button works, and the deleted Users show as deleted, their boxes off.
Your own row's box is off. A normal User gets Page not found at /admin, and 403 from /v1/admin/users
through their session. axe-core and screenshots at 1280 and 390 px."""
from __future__ import annotations

import re
import uuid
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import App, UI
from tests.browser.page_calls import call, ok

ALL_BOX = "Select every User that the filter shows, on every page"


def row(page: Any, email: str) -> Any:
    return page.get_by_role("row").filter(has=page.get_by_role("link", name=email, exact=True))


def choose_action(page: Any, action: str) -> Any:
    page.get_by_role("button", name="Selected Users", exact=True).click()
    page.get_by_role("menuitem", name=action, exact=True).click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    return dialog


def test_an_admin_filters_selects_and_acts_on_users(app: App, new_ui: Any) -> None:
    tag = f"cohort-{uuid.uuid4().hex[:6]}"  # the stack is the package's: this test's Users alone have it
    people = [app.approved_user(f"bulk{n}") for n in range(3)]
    other_admin = app.approved_admin("bulkadmin")
    admin = app.approved_admin("bulkroot")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(admin)
    ids = {u["email"]: u["id"] for u in ok(page, "GET", "v1/admin/users")["users"]}
    for each in [*people, other_admin, admin]:
        ok(page, "POST", f"v1/admin/users/{ids[each.email]}/tags", {"tag": tag})

    # Admin, then Users; the Tag filter is kept in the address.
    page.get_by_role("link", name="Admin", exact=True).click()
    expect(page.get_by_role("tab", name="Users", exact=True)).to_have_attribute("aria-selected", "true")
    page.get_by_label("Tag", exact=True).select_option(tag)
    expect(page).to_have_url(re.compile(rf"/admin\?tab=users&tag={tag}$"))
    expect(page.get_by_role("status").filter(has_text="5 Users")).to_be_visible()
    table = page.get_by_role("region", name="Users table")
    expect(table.get_by_role("row")).to_have_count(6)  # the header and the 5 Users of the tag
    for header in ("Email", "Organization", "Role", "Standing", "Tags", "Engagement", "Last Completion",
                   "Active weeks", "Tokens, 30 days", "Models", "Budget", "Monthly allowance", "API keys", "Joined"):
        expect(table.get_by_role("columnheader", name=header, exact=True)).to_be_visible()
    first = row(page, people[0].email)
    expect(first).to_contain_text("ACS tests")  # the organization of their Application
    expect(first).to_contain_text("Not activated")
    expect(first.get_by_role("link", name=people[0].email)).to_have_attribute(
        "href", re.compile(rf"admin/users/{ids[people[0].email]}$"))
    expect(row(page, admin.email).get_by_role("checkbox")).to_be_disabled()  # your own row
    page.reload()  # the address opens the same view
    expect(page.get_by_label("Tag", exact=True)).to_have_value(tag)
    ui.shoot("admin-users")

    # The header box selects every row the filter shows, but your own row.
    page.get_by_role("checkbox", name=ALL_BOX).check()
    expect(page.get_by_role("status").filter(has_text="5 Users, 4 selected")).to_be_visible()

    # Suspend leaves the other admin out, and says so; a User suspended meanwhile comes back refused.
    dialog = choose_action(page, "Suspend")
    expect(dialog).to_contain_text("Leaves out 1 admin: change an admin from their own row.")
    ok(page, "POST", f"v1/admin/users/{ids[people[0].email]}/suspend")
    dialog.get_by_role("button", name="Suspend 3 Users").click()
    expect(dialog.get_by_role("status")).to_have_text("Suspended 2 Users.")
    refusal = dialog.get_by_role("listitem").filter(has_text=people[0].email)
    expect(refusal).to_contain_text("This User is suspended already.")
    ui.shoot("admin-users-suspend-refused")
    dialog.get_by_role("button", name="Done").click()
    expect(dialog).to_be_hidden()
    for each in people:
        expect(row(page, each.email)).to_contain_text("Suspended")
    expect(row(page, other_admin.email)).to_contain_text("Active")

    # Add tag writes what the admin typed in the tag's one form.
    page.get_by_role("checkbox", name=ALL_BOX).check()
    dialog = choose_action(page, "Add tag")
    dialog.get_by_label("Tag", exact=True).fill("Hiring Wave 2")
    expect(dialog).to_contain_text("Written as hiring-wave-2.")
    dialog.get_by_role("button", name="Add tag 4 Users").click()
    expect(dialog.get_by_role("status")).to_have_text("Tagged 4 Users (hiring-wave-2).")
    dialog.get_by_role("button", name="Done").click()
    expect(row(page, people[1].email)).to_contain_text("hiring-wave-2")

    # Delete needs its words typed; the other admin is left out.
    page.get_by_role("checkbox", name=ALL_BOX).check()
    dialog = choose_action(page, "Delete")
    expect(dialog).to_contain_text("Leaves out 1 admin: change an admin from their own row.")
    confirm = dialog.get_by_role("button", name="Delete 3 Users")
    expect(confirm).to_be_disabled()
    words = dialog.get_by_label("Type delete 3 Users to confirm")
    words.fill("delete 3 users")
    expect(confirm).to_be_disabled()
    words.fill("delete 3 Users")
    expect(confirm).to_be_enabled()
    ui.shoot("admin-users-delete")
    confirm.click()
    expect(dialog.get_by_role("status")).to_have_text("Deleted 3 Users.")
    dialog.get_by_role("button", name="Done").click()
    for each in people:
        deleted = row(page, each.email)
        expect(deleted).to_contain_text("Deleted")
        expect(deleted.get_by_role("checkbox")).to_be_disabled()
    ui.shoot("admin-users-deleted")
    page.get_by_role("checkbox", name=ALL_BOX).check()
    expect(page.get_by_role("status").filter(has_text="5 Users, 1 selected")).to_be_visible()  # the other admin
    ui.check()

    # A deleted User cannot sign in: their password is gone.
    gone = new_ui()
    gone.open("sign-in")
    gone.sign_in(people[1])
    expect(gone.page.get_by_text("The email or password is not right.")).to_be_visible()


def test_the_header_box_selects_the_rows_of_every_page(app: App, new_ui: Any) -> None:
    """55 Users of one tag: two pages of rows (50, then 5); the header box selects all 55, and Set allowance
    acts on each, the second page's too."""
    tag = f"many-{uuid.uuid4().hex[:6]}"
    admin = app.approved_admin("pagesroot")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(admin)
    made = [ok(page, "POST", "v1/admin/users", {"name": f"{tag}-{n:02d}"})["id"] for n in range(55)]
    ok(page, "POST", "v1/admin/users/bulk", {"action": "add_tag", "user_ids": made, "tag": tag})
    ui.open(f"admin?tab=users&tag={tag}")
    table = page.get_by_role("region", name="Users table")
    expect(table.get_by_role("row")).to_have_count(51)  # the header and the first 50
    expect(page.get_by_text("Users 1–50 of 55")).to_be_visible()
    page.get_by_role("checkbox", name=ALL_BOX).check()
    expect(page.get_by_role("status").filter(has_text="55 Users, 55 selected")).to_be_visible()
    page.get_by_role("button", name="Next", exact=True).click()
    expect(table.get_by_role("row")).to_have_count(6)
    expect(page.get_by_text("Users 51–55 of 55")).to_be_visible()
    last = page.get_by_role("row").filter(has=page.get_by_role("link", name=f"{tag}-54", exact=True))
    expect(last.get_by_role("checkbox")).to_be_checked()
    dialog = choose_action(page, "Set allowance")
    dialog.get_by_label("Monthly allowance", exact=True).fill("2.5M")
    dialog.get_by_role("button", name="Set allowance 55 Users").click()
    expect(dialog.get_by_role("status")).to_have_text("Set the allowance of 55 Users.")
    dialog.get_by_role("button", name="Done").click()
    expect(last).to_contain_text("2.5M")
    listed = {u["id"]: u for u in ok(page, "GET", f"v1/admin/users?tag={tag}")["users"]}
    assert {listed[user_id]["monthly_allowance"] for user_id in made} == {2_500_000}
    ui.check()


def test_a_normal_user_reaches_nothing_of_the_users_tab(app: App, new_ui: Any) -> None:
    user = app.approved_user("notadmin")
    ui: UI = new_ui()
    ui.first_sign_in(user)
    ui.open("admin?tab=users")
    expect(ui.page.get_by_role("heading", name="Page not found", exact=True)).to_be_visible()
    expect(ui.page.get_by_role("checkbox", name=ALL_BOX)).to_have_count(0)
    status, answer = call(ui.page, "GET", "v1/admin/users")
    assert status in (401, 403) and answer["error"]["code"] == "admin_only", (status, answer)
    status, _ = call(ui.page, "POST", "v1/admin/users/bulk", {"action": "suspend", "user_ids": []})
    assert status in (401, 403), status
    ui.check()
