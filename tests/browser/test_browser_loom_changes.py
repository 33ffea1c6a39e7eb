"""The Loom page's changes of the tree and its keys in a real browser (spec: "Use the Loom page",
"Change the tree" and "Use the keyboard"): Edit this Node and Save, Split at the cursor (and the
dialog's message at either end), Write a sibling, Write a new root that replaces the tree, Delete
Node then its parent read; the note beside the buttons while a Branch grows, and the API's own
refusal; each key of the guide's table, a key that does nothing while its button is off, the
root without `i` and `Delete`, and Keys showing the table.

Each tree is built through the App's own routes (the same bodies as /v1/looms), with edits and
splits alone, so that its Nodes' text is known; a Branch that grows long is the tiny model's,
8 Nodes of 1,000 tokens. The page is found by the spec's names alone; each page is shot at 1280 and
390 px and checked by axe-core (conftest.py)."""
from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import App, UI
from tests.browser.page_calls import call, ok

GROW_MS = 120_000
EMPTY_SPLIT = re.compile(r"A split at the start or the end would leave a Node empty")
KEY_ROWS = [
    ["g", "Grow a Branch under the Node"],
    ["e", "Edit the Node"],
    ["s", "Split the Node, with Split at the cursor in the edit dialog"],
    ["i", "Write a sibling of the Node"],
    ["Delete", "Delete the Node and the Nodes under it"],
    ["↑ ↓ ← →, Home, End", "Move in the tree"],
    ["Esc", "Close a dialog"],
    ["?", "Show these keys"],
]


# -- the App's routes, as the page calls them ---------------------------------------------------------

def texts(loom: dict) -> list[tuple[str | None, str]]:
    """The Loom's Nodes as (the parent's text, the text), in the order of a read."""
    by_id = {node["id"]: node for node in loom["nodes"]}
    return [(by_id[node["parent_id"]]["text"] if node["parent_id"] else None, node["text"]) for node in loom["nodes"]]


def read(page: Any, loom_id: str) -> dict:
    return ok(page, "GET", f"account/looms/{loom_id}")


def signed_in(app: App, ui: UI, tag: str) -> None:
    user = app.approved_user(tag)
    ui.first_sign_in(user)


def make_tree(page: Any) -> dict:
    """A Loom "The sky is" with the children " blue today" and " green", made by a split and a
    sibling; the Loom as read."""
    loom = ok(page, "POST", "account/looms", {"prompt": "The sky is blue today"})
    root = loom["nodes"][0]
    loom = ok(page, "POST", f"account/looms/{loom['id']}/nodes/{root['id']}/split", {"offset": 10})
    child = next(node for node in loom["nodes"] if node["parent_id"] == root["id"])
    loom = ok(page, "POST", f"account/looms/{loom['id']}/nodes/{child['id']}/sibling", {"text": " green"})
    assert texts(loom) == [(None, "The sky is"), ("The sky is", " blue today"), ("The sky is", " green")]
    return loom


def node_id(loom: dict, text: str) -> str:
    return next(node["id"] for node in loom["nodes"] if node["text"] == text)


def grow(page: Any, loom: dict, parent_text: str) -> None:
    """A Branch of 8 long Nodes (the most tokens and Nodes that a Branch takes) under the Node of
    this text, as another client of the App grows it: it grows until Stop."""
    ok(page, "POST", f"account/looms/{loom['id']}/nodes/{node_id(loom, parent_text)}/branch",
       {"model": "tiny-llama", "max_tokens": 1000, "n": 8})


# -- the page ------------------------------------------------------------------------------------------

def open_loom(ui: UI) -> Any:
    """The Loom page, which opens the Loom changed last."""
    page = ui.open("loom")
    expect(page.get_by_role("tree")).to_be_visible()
    return page


def row(page: Any, text: str) -> Any:
    """The tree's row of the Node whose text starts with `text`."""
    return page.get_by_role("treeitem").filter(has=page.locator(".tree-text", has_text=re.compile(r"^\s*" + re.escape(text.strip()))))


def select(page: Any, text: str) -> None:
    """Read the Node: select its row, opening its parents' rows first where they are folded."""
    target = row(page, text)
    if not target.count():
        for folded in page.get_by_role("treeitem", expanded=False).all():
            folded.locator(".tree-toggle").click()
    target.click()
    expect(target).to_have_attribute("aria-selected", "true")


def selected(page: Any) -> Any:
    return page.locator("[role=treeitem][aria-selected=true] .tree-text")


def button(scope: Any, name: str) -> Any:
    return scope.get_by_role("button", name=name, exact=True)


def dialog(page: Any, title: str) -> Any:
    return page.get_by_role("dialog", name=title)


def note(page: Any) -> Any:
    return page.locator(".loom-change-note")


def put_cursor(area: Any, at: int) -> None:
    """Put the text box's cursor after `at` characters, as a click there does."""
    area.focus()
    area.evaluate("(box, at) => box.setSelectionRange(at, at)", at)


def no_focus(page: Any) -> None:
    """Take the focus out of any text box, as a click on the page's empty space does."""
    page.evaluate("() => document.activeElement && document.activeElement.blur()")


# -- Change the tree -------------------------------------------------------------------------------------

def test_edit_split_sibling_new_root_and_delete(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    signed_in(app, ui, "loomc-edits")
    page = ui.page
    loom = make_tree(page)
    open_loom(ui)
    select(page, " blue today")
    ui.shoot("loom-changes-buttons")

    # Edit: Edit this Node, change the Text, Save. The Node under it keeps its own text.
    grow_free = ok(page, "POST", f"account/looms/{loom['id']}/nodes/{node_id(loom, ' blue today')}/split", {"offset": 5})
    assert texts(grow_free)[1:] == [("The sky is", " blue"), (" blue", " today"), ("The sky is", " green")]
    open_loom(ui)
    select(page, " blue")
    button(page, "Edit").click()
    edit = dialog(page, "Edit this Node")
    expect(edit).to_be_visible()
    area = edit.get_by_label("Text", exact=True)
    expect(area).to_have_value(" blue")
    area.fill(" grey")
    ui.shoot("loom-changes-edit")
    button(edit, "Save").click()
    expect(edit).to_have_count(0)
    expect(row(page, "grey")).to_be_visible()
    assert texts(read(page, loom["id"]))[1:] == [("The sky is", " grey"), (" grey", " today"), ("The sky is", " green")]

    # Split at the cursor: at the start or the end, the dialog asks to move the cursor; inside the
    # text, the Node keeps what comes before it and a new child gets the rest.
    select(page, " green")
    button(page, "Edit").click()
    edit = dialog(page, "Edit this Node")
    area = edit.get_by_label("Text", exact=True)
    area.fill(" green and gold")
    for at in (0, len(" green and gold")):
        put_cursor(area, at)
        button(edit, "Split at the cursor").click()
        expect(edit.get_by_text(EMPTY_SPLIT)).to_be_visible()
        expect(area).to_be_focused()
    ui.shoot("loom-changes-split-at-an-end")
    put_cursor(area, len(" green"))
    button(edit, "Split at the cursor").click()
    expect(edit).to_have_count(0)
    assert texts(read(page, loom["id"]))[3:] == [("The sky is", " green"), (" green", " and gold")]
    expect(row(page, "and gold")).to_be_attached()

    # Sibling: Write a sibling, its Text, Add sibling; the page reads the new Node.
    select(page, " grey")
    button(page, "Sibling").click()
    sibling = dialog(page, "Write a sibling")
    sibling.get_by_label("Text", exact=True).fill(" red at night")
    ui.shoot("loom-changes-sibling")
    button(sibling, "Add sibling").click()
    expect(sibling).to_have_count(0)
    expect(selected(page)).to_have_text("red at night")
    assert ("The sky is", " red at night") == texts(read(page, loom["id"]))[-1]

    # Delete Node, after a confirmation: the Node and the Nodes under it go, and the page reads
    # its parent.
    select(page, " grey")
    button(page, "Delete Node").click()
    confirm = dialog(page, "Delete this Node?")
    expect(confirm).to_contain_text("The Node and the Nodes under it go")
    ui.shoot("loom-changes-delete")
    button(confirm, "Delete Node").click()
    expect(confirm).to_have_count(0)
    expect(selected(page)).to_have_text("The sky is")
    assert texts(read(page, loom["id"])) == [
        (None, "The sky is"), ("The sky is", " green"), (" green", " and gold"), ("The sky is", " red at night")]

    # The root: New root instead of Sibling, and no Delete Node.
    expect(button(page, "Sibling")).to_have_count(0)
    expect(button(page, "Delete Node")).to_have_count(0)
    button(page, "New root").click()
    new_root = dialog(page, "Write a new root")
    expect(new_root).to_contain_text("Replace the tree replaces the whole tree, and every Node of the Loom goes.")
    new_root.get_by_label("Text", exact=True).fill("Once upon a time")
    ui.shoot("loom-changes-new-root")
    button(new_root, "Replace the tree").click()
    expect(new_root).to_have_count(0)
    expect(page.get_by_role("treeitem")).to_have_count(1)
    expect(selected(page)).to_have_text("Once upon a time")
    assert texts(read(page, loom["id"])) == [(None, "Once upon a time")]
    ui.check()


def test_the_note_says_why_a_change_waits_while_a_branch_grows(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    signed_in(app, ui, "loomc-note")
    page = ui.page
    loom = make_tree(page)
    grow(page, loom, " blue today")
    open_loom(ui)

    # Under the root a Branch grows: every change of the root waits, and the note says why.
    select(page, "The sky is")
    expect(note(page)).to_have_text(re.compile(r"^A Branch grows under this Node, so a change waits"))
    for name in ("Edit", "New root"):
        expect(button(page, name)).to_be_disabled()
    expect(button(page, "Keys")).to_be_enabled()
    ui.shoot("loom-changes-note-root")

    # Beside the growing Node's parent: a sibling of " green" waits, its edit and delete do not.
    select(page, " green")
    expect(note(page)).to_have_text(re.compile(r"^A Branch grows under this Node's parent, so a sibling waits"))
    expect(button(page, "Sibling")).to_be_disabled()
    expect(button(page, "Edit")).to_be_enabled()
    expect(button(page, "Delete Node")).to_be_enabled()

    # Above the growing Nodes, and a growing Node itself.
    select(page, " blue today")
    expect(note(page)).to_have_text(re.compile(r"^A Branch grows under this Node, so a change waits"))
    for name in ("Edit", "Sibling", "Delete Node"):
        expect(button(page, name)).to_be_disabled()
    ui.shoot("loom-changes-note-growing")
    running = page.get_by_role("treeitem").filter(has=page.locator(".badge")).first
    running.click()
    expect(note(page)).to_have_text(re.compile(r"^This Node is (running|queued), so a change waits"))
    for name in ("Edit", "Sibling", "Delete Node"):
        expect(button(page, name)).to_be_disabled()

    # Stop: the Branch ends, the note goes and the buttons come back.
    button(page, "Stop").click()
    select(page, " blue today")
    expect(note(page)).to_have_text("", timeout=GROW_MS)
    for name in ("Edit", "Sibling", "Delete Node", "Keys"):
        expect(button(page, name)).to_be_enabled()

    # A Branch that another client starts while the edit dialog is open: the API refuses the save,
    # and the dialog and the note say the API's why.
    button(page, "Edit").click()
    edit = dialog(page, "Edit this Node")
    edit.get_by_label("Text", exact=True).fill(" blue, then grey")
    grow(page, loom, " blue today")
    button(edit, "Save").click()
    refusal = re.compile(r"^A Node under this Node is queued or running")
    expect(edit.locator(".form-error")).to_have_text(refusal)
    ui.shoot("loom-changes-refused")
    button(edit, "Cancel").click()
    expect(edit).to_have_count(0)
    expect(note(page)).to_have_text(re.compile(r"^(A Node under this Node is queued or running|A Branch grows under this Node)"))
    ok(page, "POST", f"account/looms/{loom['id']}/cancel", {})
    assert texts(read(page, loom["id"]))[1] == ("The sky is", " blue today")  # the refused edit changed nothing
    ui.check()


# -- Use the keyboard ------------------------------------------------------------------------------------

def test_each_key_of_the_table(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    signed_in(app, ui, "loomc-keys")
    page = ui.page
    loom = make_tree(page)
    open_loom(ui)
    select(page, " blue today")
    no_focus(page)
    keyboard = page.keyboard

    # ? and Keys show the guide's table; Esc closes the dialog.
    keyboard.press("?")
    keys = dialog(page, "Keys")
    expect(keys).to_be_visible()
    table = keys.get_by_role("table")
    expect(table.get_by_role("columnheader")).to_have_text(["Key", "What it does"])
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(len(KEY_ROWS))
    for index, (key, what) in enumerate(KEY_ROWS):
        expect(rows.nth(index).locator("td")).to_have_text([key, what])
    ui.shoot("loom-changes-keys")
    keyboard.press("Escape")
    expect(keys).to_have_count(0)
    buttons = page.locator(".loom-change-buttons button")
    expect(buttons.last).to_have_text("Keys")  # at the end of the Node's buttons
    button(page, "Keys").click()
    expect(dialog(page, "Keys")).to_be_visible()
    button(dialog(page, "Keys"), "Close").click()
    expect(dialog(page, "Keys")).to_have_count(0)

    # e opens Edit this Node; while it is open, the keys are the text box's: e is a letter there.
    no_focus(page)
    keyboard.press("e")
    edit = dialog(page, "Edit this Node")
    expect(edit).to_be_visible()
    area = edit.get_by_label("Text", exact=True)
    area.press("End")
    keyboard.type(" e")
    expect(area).to_have_value(" blue today e")
    keyboard.press("Escape")
    expect(edit).to_have_count(0)

    # s opens the same dialog, with Split at the cursor.
    no_focus(page)
    keyboard.press("s")
    edit = dialog(page, "Edit this Node")
    expect(button(edit, "Split at the cursor")).to_be_visible()
    put_cursor(edit.get_by_label("Text", exact=True), len(" blue"))
    button(edit, "Split at the cursor").click()
    expect(edit).to_have_count(0)
    assert texts(read(page, loom["id"]))[1:3] == [("The sky is", " blue"), (" blue", " today")]

    # i: Write a sibling.
    no_focus(page)
    keyboard.press("i")
    sibling = dialog(page, "Write a sibling")
    expect(sibling).to_be_visible()
    sibling.get_by_label("Text", exact=True).fill(" pink")
    button(sibling, "Add sibling").click()
    expect(sibling).to_have_count(0)
    expect(selected(page)).to_have_text("pink")

    # Delete: Delete Node's confirmation; then the parent is read.
    no_focus(page)
    keyboard.press("Delete")
    confirm = dialog(page, "Delete this Node?")
    expect(confirm).to_be_visible()
    button(confirm, "Delete Node").click()
    expect(confirm).to_have_count(0)
    expect(selected(page)).to_have_text("The sky is")

    # The arrows, Home and End move in the tree.
    no_focus(page)
    keyboard.press("End")
    expect(selected(page)).not_to_have_text("The sky is")
    keyboard.press("Home")
    expect(selected(page)).to_have_text("The sky is")
    keyboard.press("ArrowDown")
    expect(selected(page)).to_have_text("blue")
    keyboard.press("ArrowUp")
    expect(selected(page)).to_have_text("The sky is")
    select(page, " today")
    no_focus(page)
    keyboard.press("ArrowLeft")
    expect(selected(page)).to_have_text("blue")
    keyboard.press("ArrowRight")
    expect(selected(page)).to_have_text("today")

    # The root has no i and no Delete: the keys do nothing there.
    keyboard.press("Home")
    expect(selected(page)).to_have_text("The sky is")
    count = len(read(page, loom["id"])["nodes"])
    for key in ("i", "Delete"):
        no_focus(page)
        keyboard.press(key)
        expect(page.get_by_role("dialog")).to_have_count(0)
    assert len(read(page, loom["id"])["nodes"]) == count

    # A key does nothing while its button is off: with a Branch growing under the root, e and s.
    grow(page, read(page, loom["id"]), " blue")
    page.reload()
    expect(button(page, "Edit")).to_be_disabled()
    no_focus(page)
    for key in ("e", "s"):
        keyboard.press(key)
        expect(page.get_by_role("dialog")).to_have_count(0)
    button(page, "Stop").click()
    expect(button(page, "Edit")).to_be_enabled(timeout=GROW_MS)

    # g grows a Branch under the Node, as Branch does.
    select(page, " green")
    rows_before = page.get_by_role("treeitem").count()
    branches = int(page.get_by_label("Branches", exact=True).input_value())  # the last Branch's: 8
    no_focus(page)
    keyboard.press("g")
    expect(page.get_by_role("treeitem")).to_have_count(rows_before + branches, timeout=GROW_MS)
    after = read(page, loom["id"])
    green = node_id(after, " green")
    assert [node["parent_id"] for node in after["nodes"]].count(green) == branches
    ui.check()
