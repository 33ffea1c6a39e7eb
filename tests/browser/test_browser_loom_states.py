"""The Loom page's states in a real browser (spec: "Use the Loom page", "Branch under a Node"): a
Loom opens with its last Branch's settings, Seed blank, and Top logprobs shown at 5 when that Branch
asked for none; a Node that failed shows why under the text that it had; the likeliest tokens of a
token keep the page's heading order (axe-core, every impact, at 1280 and 390 px); a Node or a whole
Loom that another client deletes leaves the open page within a few seconds, also while the page
follows a growing Branch, and also when the delete falls in the same second as the page's own change.

Each Loom is made through the App's own routes (the same bodies as /v1/looms); another client is a
second browser of the same User. The page is found by the spec's names alone; each page is shot at
1280 and 390 px and checked by axe-core (conftest.py)."""
from __future__ import annotations

import re
import time
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import WIDTHS, App, UI, User
from tests.browser.page_calls import ok

GROW_MS = 120_000
# What another client's change may take to reach an open page: the list's poll (every 3 s), and for a
# change in a second that the page already knew, the read a second after it learned that second.
REACH_MS = 10_000
GONE = "None of your Looms has this id. It may have been deleted."


def button(scope: Any, name: str) -> Any:
    return scope.get_by_role("button", name=name, exact=True)


def rows(page: Any) -> Any:
    return page.get_by_role("tree", name="Tree").get_by_role("treeitem")


def row(page: Any, text: str) -> Any:
    """The tree's row of the Node whose text starts with `text`."""
    return rows(page).filter(has=page.locator(".tree-text", has_text=re.compile(r"^\s*" + re.escape(text.strip()))))


def selected(page: Any) -> Any:
    return page.locator("[role=treeitem][aria-selected=true] .tree-text")


def field(page: Any, label: str) -> Any:
    return page.get_by_label(label, exact=True)


def wait_no_growing(page: Any) -> None:
    expect(page.locator(".tree-row .badge-run-queued, .tree-row .badge-run-running")).to_have_count(0, timeout=GROW_MS)


def signed_in(app: App, ui: UI, tag: str) -> User:
    user = app.approved_user(tag)
    ui.first_sign_in(user)
    return user


def another_browser(new_ui: Any, user: User) -> UI:
    """A second browser of the same User: another client of the same Looms."""
    other: UI = new_ui()
    other.open("sign-in")
    other.sign_in(user)
    expect(other.page).not_to_have_url(re.compile(r"sign-in"))
    return other


def branch(page: Any, loom: dict, parent: str, body: dict) -> list[dict]:
    """A Branch under the Node `parent` (an id), as the App's route takes it; its Nodes."""
    return ok(page, "POST", f"account/looms/{loom['id']}/nodes/{parent}/branch", body)["data"]


def ended(page: Any, loom_id: str) -> dict:
    """The Loom once no Node of it grows."""
    deadline = time.monotonic() + GROW_MS / 1000
    while True:
        loom = ok(page, "GET", f"account/looms/{loom_id}")
        if not [node for node in loom["nodes"] if node["status"] in ("queued", "running")]:
            return loom
        assert time.monotonic() < deadline, loom
        time.sleep(0.25)


def axe_findings(ui: UI) -> list[dict]:
    """axe-core's findings of every impact, moderate and minor too, at each width (the page as it is)."""
    page = ui.page
    found = []
    for width_name, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(150)
        for violation in page.evaluate("""async () => {
            const result = await axe.run(document, {resultTypes: ["violations"]});
            return result.violations.map(v => ({id: v.id, impact: v.impact,
                nodes: v.nodes.map(n => n.target.join(" ")).slice(0, 5)}));
        }"""):
            found.append({"width": width_name, **violation})
    page.set_viewport_size(dict(zip(("width", "height"), WIDTHS["desktop"])))
    return found


# -- A Loom opens with its last Branch's settings ------------------------------------------------------

def test_a_loom_opens_with_its_last_branchs_settings(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    page = ui.page
    signed_in(app, ui, "loomlast")
    # A Branch that asked for no log probabilities, with a seed and settings apart from the defaults.
    plain = ok(page, "POST", "account/looms", {"prompt": "The sky is"})
    branch(page, plain, plain["nodes"][0]["id"], {
        "model": "tiny-llama", "n": 3, "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 5,
        "seed": 42, "stop": ["\n", "."]})
    ended(page, plain["id"])
    ui.open(f"loom?loom={plain['id']}")
    expect(rows(page)).to_have_count(4)
    expect(field(page, "Model")).to_have_value("tiny-llama")
    expect(field(page, "Branches")).to_have_value("3")
    expect(field(page, "Max tokens")).to_have_value("7")
    expect(field(page, "Temperature")).to_have_value("0.5")
    expect(field(page, "Top p")).to_have_value("0.9")
    expect(field(page, "Top k")).to_have_value("5")
    expect(field(page, "Stop")).to_have_value("\\n\n.")  # one text a line, a line break as \n
    expect(field(page, "Seed")).to_have_value("")  # a new random seed for the next Branch
    expect(field(page, "Top logprobs shown")).to_have_value("5")  # for the heatmap
    ui.shoot("loom-last-branch")

    # A last Branch that asked for 2 opens with 2, and its own Branches; Seed blank again.
    asked = ok(page, "POST", "account/looms", {"prompt": "The sea is"})
    branch(page, asked, asked["nodes"][0]["id"], {"model": "tiny-llama", "n": 2, "max_tokens": 4, "logprobs": 2,
                                                  "seed": 7})
    ended(page, asked["id"])
    ui.open(f"loom?loom={asked['id']}")
    expect(rows(page)).to_have_count(3)
    expect(field(page, "Top logprobs shown")).to_have_value("2")
    expect(field(page, "Branches")).to_have_value("2")
    expect(field(page, "Max tokens")).to_have_value("4")
    expect(field(page, "Temperature")).to_have_value("1")
    expect(field(page, "Seed")).to_have_value("")
    # The first Loom again, in the same page: its own settings come back.
    page.get_by_role("region", name="Your Looms").locator(".looms-open", has_text="The sky is").click()
    expect(field(page, "Branches")).to_have_value("3")
    expect(field(page, "Top logprobs shown")).to_have_value("5")
    ui.check()


# -- A failed Node says why ----------------------------------------------------------------------------

def test_a_failed_node_shows_why_under_its_text(app: App, new_ui: Any) -> None:
    """A path longer than the model's context (the test model holds 2,048 tokens) is no refusal when
    the Branch is made: its Node fails when it runs (spec: "Read a failed Node")."""
    ui: UI = new_ui()
    page = ui.page
    signed_in(app, ui, "loomfail")
    prompt = "The" + " the" * 2100
    loom = ok(page, "POST", "account/looms", {"prompt": prompt})
    (made,) = branch(page, loom, loom["nodes"][0]["id"], {"model": "tiny-llama", "n": 1, "max_tokens": 16})
    failed = next(node for node in ended(page, loom["id"])["nodes"] if node["id"] == made["id"])
    assert failed["status"] == "failed", failed
    assert failed["error"]["code"] == "context_length_exceeded", failed
    message = failed["error"]["message"]
    assert message

    ui.open(f"loom?loom={loom['id']}")
    expect(rows(page)).to_have_count(2)
    rows(page).nth(1).click()
    text = page.get_by_role("region", name="Text")
    expect(text.locator(".badge")).to_have_text("Failed")
    # Why, under the text that the Node had (none here: the path before it, in gray).
    reason = text.get_by_role("alert")
    expect(reason).to_have_text(message)
    assert page.evaluate("""() => {
        const path = document.querySelector('.loom-path');
        const why = document.querySelector('.loom-text [role=alert]');
        return Boolean(path.compareDocumentPosition(why) & Node.DOCUMENT_POSITION_FOLLOWING);
    }""")
    expect(text.locator(".path-earlier")).to_have_text(prompt)
    # A failed Node takes no Branch; the note says what works.
    expect(button(page, "Branch")).to_be_disabled()
    expect(page.locator(".branch-note")).to_have_text(
        "Branch works under a Node that completed or that you stopped. This Node failed.")
    ui.shoot("loom-failed-node")
    ui.check()


# -- The likeliest tokens keep the heading order -------------------------------------------------------

def test_the_likeliest_tokens_keep_the_heading_order(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    page = ui.page
    signed_in(app, ui, "loomalt")
    loom = ok(page, "POST", "account/looms", {"prompt": "The sky is"})
    branch(page, loom, loom["nodes"][0]["id"], {"model": "tiny-llama", "n": 1, "max_tokens": 4, "logprobs": 3})
    ended(page, loom["id"])
    ui.open(f"loom?loom={loom['id']}")
    rows(page).nth(1).click()
    text = page.get_by_role("region", name="Text")
    text.locator(".tok").first.click()
    box = page.get_by_role("region", name="The likeliest tokens at token 1")
    expect(box).to_be_visible()
    expect(box.get_by_role("heading", name="The likeliest tokens at token 1", level=3)).to_be_visible()
    expect(box.locator(".alt")).not_to_have_count(0)
    ui.shoot("loom-likeliest")  # axe-core's serious findings, and the pictures
    # Every finding, not only the serious ones: the box's heading comes in the page's order.
    assert axe_findings(ui) == []
    button(box, "Close").click()
    expect(box).to_have_count(0)
    ui.check()


# -- Another client's delete reaches the open page -----------------------------------------------------

# A try fits the page's edit and the other client's delete in one second of the clock; a loaded
# machine may miss a second now and then, so there are several tries, each with its own Node.
SAME_SECOND_TRIES = (" gray", " pink", " brown", " white", " black")


def make_tree(page: Any) -> dict:
    """"The sky is" with the children " blue today", then " green", " red" and the SAME_SECOND_TRIES
    (a split and siblings: no model); the Loom as read."""
    loom = ok(page, "POST", "account/looms", {"prompt": "The sky is blue today"})
    root = loom["nodes"][0]
    loom = ok(page, "POST", f"account/looms/{loom['id']}/nodes/{root['id']}/split", {"offset": 10})
    child = next(node for node in loom["nodes"] if node["parent_id"] == root["id"])
    for text in (" green", " red", *SAME_SECOND_TRIES):
        loom = ok(page, "POST", f"account/looms/{loom['id']}/nodes/{child['id']}/sibling", {"text": text})
    return loom


def node_id(loom: dict, text: str) -> str:
    return next(node["id"] for node in loom["nodes"] if node["text"] == text)


def test_a_delete_by_another_client_reaches_the_open_page(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    page = ui.page
    user = signed_in(app, ui, "loomgone")
    loom = make_tree(page)
    other = another_browser(new_ui, user)
    gone = lambda text: ok(other.page, "DELETE", f"account/looms/{loom['id']}/nodes/{node_id(loom, text)}")  # noqa: E731
    ui.open(f"loom?loom={loom['id']}")
    expect(rows(page)).to_have_count(4 + len(SAME_SECOND_TRIES))

    # The Node that the page reads goes: the page drops it and reads its parent.
    row(page, " green").click()
    expect(selected(page)).to_have_text(re.compile(r"^\s*green"))
    gone(" green")
    expect(rows(page)).to_have_count(3 + len(SAME_SECOND_TRIES), timeout=REACH_MS)
    expect(row(page, " green")).to_have_count(0)
    expect(selected(page)).to_have_text("The sky is")
    expect(page.locator(".loom-path")).to_have_text("The sky is")

    # While a Branch grows (the page follows its stream, which never sends a Node that goes).
    row(page, " blue today").click()
    field(page, "Branches").fill("8")
    field(page, "Max tokens").fill("1000")
    button(page, "Branch").click()
    expect(rows(page)).to_have_count(11 + len(SAME_SECOND_TRIES))
    expect(button(page, "Stop")).to_be_visible()
    gone(" red")
    expect(row(page, " red")).to_have_count(0, timeout=REACH_MS)
    expect(rows(page)).to_have_count(10 + len(SAME_SECOND_TRIES))
    assert page.locator(".tree-row .badge-run-running, .tree-row .badge-run-queued").count() > 0, \
        "the Branch ended before the delete: the page did not follow a stream"
    ui.shoot("loom-deleted-elsewhere")
    button(page, "Stop").click()
    wait_no_growing(page)

    # In the same second as the page's own change (an edit of the root), which tells the page that
    # second: a read a second later finds the delete.
    same_second = False
    for text in SAME_SECOND_TRIES:
        rows(page).first.click()
        button(page, "Edit").click()
        edit = page.get_by_role("dialog", name="Edit this Node")
        edit.get_by_label("Text", exact=True).fill(f"The sky, then{text},")
        time.sleep(1 - time.time() % 1)  # the start of a second, so that both fall in it
        began = time.time()
        button(edit, "Save").click()
        expect(edit).to_have_count(0)
        gone(text)
        same_second = int(began) == int(time.time())
        expect(row(page, text)).to_have_count(0, timeout=REACH_MS)
        if same_second:
            break
    assert same_second, "no delete fell in the second of the page's edit"

    # The whole Loom goes: the page says so, and Your Looms drops it.
    ok(other.page, "DELETE", f"account/looms/{loom['id']}")
    expect(page.get_by_role("alert")).to_have_text(GONE, timeout=REACH_MS)
    expect(page.get_by_role("region", name="Your Looms").locator(".looms-open")).to_have_count(0)
    ui.shoot("loom-gone-elsewhere")
    other.check()
    ui.check()
