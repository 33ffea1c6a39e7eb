"""The Loom page while a model starts, in a real browser (spec: "Branch under a Node": a Branch of a
model that is not Warm waits while the model starts, and one line under the title says how far the
start has got and about how long is left, as in the Playground, whose Run of the same model waits
beside it with the same line above its output: "Wait for a model to start").

The browser tests' own profile serves its one model Warm, so this module serves the slow-boot
profile's App beside it (tests/e2e/test_e2e_boot.py's model: the tiny Llama on vLLM, scaled to zero),
under its own prefix, on the same ledger: the User that the browser App approves signs in there. A
Ray actor holds the CPUs that the model's replica needs, as a busy cluster holds its GPUs, so the
start waits at its first stage, Waiting for a GPU, for as long as the test looks; then it goes on,
and the Branch's Node grows. The page is shot at 1280 and 390 px and checked by axe-core."""
from __future__ import annotations

import re
from typing import Any, Iterator

import pytest
import ray
from playwright.sync_api import expect

from tests.browser.conftest import App, UI, watch
from tests.browser.page_calls import ok
from tests.cpu_holder import hold_the_free_cpus

BOOT_APP, BOOT_PREFIX = "browser-boot", "/browser-boot"
START_MS = 180_000  # the replica's start on the CPUs once they are free, and its 2 tokens
# The start line's words (playground/models.js startLine): the model's short name, the stage, the
# time so far (under a minute counts as 1) and what is left of the 6 minutes that a start takes.
WAITING = re.compile(r"^slow llama random is starting: Waiting for a GPU, 1 minute so far\. About [56] minutes left\.$")
# The console's 4xx of the boot App's JSON routes are answers that it shows, as the browser App's are.
HANDLED = re.compile(rf"^console error \([^)]*{BOOT_PREFIX}/account/[^)]*\): Failed to load resource: "
                     r"the server responded with a status of 4\d\d\b")


@pytest.fixture(scope="module")
def boot_root(app: App) -> Iterator[str]:
    """The slow-boot profile's App under its own prefix: its root address."""
    env = {"ACS_PUBLIC_BASE_URL": app.serve.root + BOOT_PREFIX}
    with app.serve.application("slow-boot", BOOT_APP, BOOT_PREFIX, env=env) as base:
        yield base.removesuffix("/v1")


def test_a_branch_of_a_cold_model_says_how_far_its_start_has_got(app: App, new_ui: Any, boot_root: str) -> None:
    ui: UI = new_ui()
    page = ui.page
    user = app.approved_user("loomcold")
    page.goto(f"{boot_root}/sign-in")
    ui.sign_in(user)
    expect(page).to_have_url(re.compile(rf"{BOOT_PREFIX}/api-keys$"))
    loom = ok(page, "POST", "account/looms", {"prompt": "The sky is"})
    holder = hold_the_free_cpus()
    try:
        page.goto(f"{boot_root}/loom?loom={loom['id']}")
        expect(page.get_by_label("Model", exact=True)).to_have_value("slow-llama")
        page.get_by_label("Max tokens", exact=True).fill("2")
        page.get_by_role("button", name="Branch", exact=True).click()
        line = page.locator(".start-line")
        expect(line).to_have_text(WAITING, timeout=60_000)
        expect(line).to_have_attribute("role", "status")
        # Under the title.
        assert page.evaluate("""() => {
            const head = document.querySelector('.loom-head');
            const line = document.querySelector('.start-line');
            return Boolean(head.compareDocumentPosition(line) & Node.DOCUMENT_POSITION_FOLLOWING);
        }""")
        expect(page.get_by_role("tree", name="Tree").get_by_role("treeitem").nth(1).locator(".badge")).to_have_text(
            re.compile("^(Waiting|Running)$"))
        ui.shoot("loom-model-starting")
        # A Playground Run of the same model waits too, with the same line above its output (spec:
        # "Wait for a model to start"); one start of the model serves both pages' checks.
        loom_page, ui.page = page, ui.context.new_page()
        watch(ui)
        play = ui.page
        play.goto(f"{boot_root}/playground")
        expect(play.get_by_label("Model", exact=True)).to_have_value("slow-llama")
        play.get_by_label("Prompt", exact=True).fill("The sky is")
        play.get_by_label("Max tokens", exact=True).fill("2")
        play.get_by_role("button", name="Run", exact=True).click()
        run = play.get_by_role("article", name="Run 1", exact=True)
        expect(run.locator(".start-line")).to_have_text(WAITING, timeout=60_000)
        expect(run.locator(".start-line")).to_have_attribute("role", "status")
        expect(run.locator(".badge")).to_have_text(re.compile("^(Waiting|Running)$"))
        ui.shoot("playground-model-starting")
        ui.page = loom_page
    finally:
        ray.kill(holder)
    # The start goes on by itself: the Node grows, and the line goes.
    expect(page.locator(".tree-row .badge-run-queued, .tree-row .badge-run-running")).to_have_count(0, timeout=START_MS)
    expect(page.locator(".start-line")).to_have_count(0)
    node = ok(page, "GET", f"account/looms/{loom['id']}")["nodes"][1]
    assert node["status"] == "completed" and node["text"], node
    # The Run goes on by itself as well, and its line goes.
    expect(run.locator(".badge")).to_have_text("Completed", timeout=START_MS)
    expect(run.locator(".start-line")).to_have_count(0)
    ui.errors = [error for error in ui.errors if not HANDLED.match(error)]
    ui.check()
