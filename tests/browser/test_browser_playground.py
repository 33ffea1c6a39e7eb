"""The Playground in a real browser (spec: "Use the Playground"), on the test profile's tiny model:
sign-in with a key opens it; a prompt with the gray example, settings marked out of range as you
type, a Run that streams and one that stops, its tokens and heatmap, Copy, a refusal with its
setting marked, the settings in the address and the prompt as a draft; Compare of 6 models with
Run all and Stop all, the Runs table with its row menu, Restore, Compare 2 runs, a token's re-run,
the export files read back, and a Run followed after its tab closed. Each page is shot at 1280 and
390 px and checked by axe-core (conftest.py)."""
from __future__ import annotations

import io
import json
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy
from playwright.sync_api import expect

from tests.browser.conftest import PREFIX, App, UI, User

EXAMPLE = "The three most surprising facts about octopuses are"
RUN_WAIT_MS = 120_000
HIDDEN_SIZE = 64  # the tiny model's (configs/models/tiny-llama.yaml)  # a Run on the CPU's tiny model: its model is Warm, its tokens come fast


def make_key(ui: UI, name: str = "laptop") -> None:
    """A key made through the App's own route (API Keys' dialog has its own tests)."""
    status = ui.page.evaluate("""async (name) => {
        const token = decodeURIComponent(document.cookie.match(/acs_csrf=([^;]+)/)[1]);
        const answer = await fetch("account/keys", {method: "POST", body: JSON.stringify({name}),
            headers: {"Content-Type": "application/json", "X-CSRF-Token": token}});
        return answer.status;
    }""", name)
    assert status == 201, status


def sign_out(ui: UI, user: User) -> None:
    page = ui.page
    page.get_by_role("button", name=f"{user.name}: account menu").click()
    page.get_by_role("menuitem", name="Sign out").click()
    expect(page).to_have_url(re.compile(rf"{PREFIX}/sign-in"))


def signed_in_with_key(app: App, ui: UI, tag: str) -> User:
    """A User with a key, signed in: the Playground opens (spec: "Sign in")."""
    user = app.approved_user(tag)
    ui.first_sign_in(user)
    make_key(ui)
    sign_out(ui, user)
    ui.sign_in(user)
    expect(ui.page).to_have_url(re.compile(rf"{PREFIX}/playground(\?|$)"))
    expect(ui.page.get_by_role("heading", name="Playground", level=1)).to_be_visible()
    return user


def setting(page: Any, label: str) -> Any:
    """A setting of the form; those under More settings open it first."""
    field = page.locator(".settings").get_by_label(label, exact=True)
    if not field.is_visible():
        page.locator(".settings summary", has_text="More settings").click()
    return field


def run_view(page: Any, number: int) -> Any:
    return page.get_by_role("article", name=f"Run {number}", exact=True)


def newest_number(page: Any) -> int:
    title = page.locator(".run h3").first.inner_text()
    return int(title.split()[-1])


def wait_ended(page: Any, number: int, status: str = "Completed") -> Any:
    view = run_view(page, number)
    expect(view.locator(".badge")).to_have_text(status, timeout=RUN_WAIT_MS)
    return view


def address(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def models_of(page: Any) -> list[dict[str, Any]]:
    return [json.loads(value) for value in address(page).get("m", [])]


def clipboard(page: Any) -> str:
    return page.evaluate("() => navigator.clipboard.readText()")


def runs_of(page: Any) -> list[dict[str, Any]]:
    """The User's Runs as the App's own route lists them, newest first."""
    return page.evaluate("async () => (await (await fetch('account/runs')).json()).data")


def row_action(page: Any, number: int, action: str) -> None:
    page.get_by_role("button", name=f"Actions of run {number}", exact=True).click()
    page.get_by_role("menuitem", name=action, exact=True).click()


# -- Run a prompt ---------------------------------------------------------------------------------

def test_a_run_streams_stops_and_keeps_its_settings_in_the_address(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    page = ui.page
    user = signed_in_with_key(app, ui, "play")
    nav = page.get_by_role("navigation", name="The App").locator(".nav-pages a")
    expect(nav).to_have_text(["Playground", "Usage", "Jobs", "API Keys"])  # the spec's order, without Loom yet
    ui.shoot("playground-new")

    # Tab in the empty prompt box puts in the gray example; the next Tab moves on.
    prompt = page.get_by_label("Prompt", exact=True)
    expect(prompt).to_have_attribute("placeholder", EXAMPLE)
    prompt.focus()
    page.keyboard.press("Tab")
    expect(prompt).to_have_value(EXAMPLE)
    expect(prompt).to_be_focused()
    page.keyboard.press("Tab")
    expect(prompt).not_to_be_focused()

    # A number out of range is marked as you type, with its range; Reset to default puts all back.
    top_p = setting(page, "Top p")
    top_p.fill("2")
    expect(page.get_by_text("Top p: more than 0 and at most 1.")).to_be_visible()
    expect(top_p).to_have_attribute("aria-invalid", "true")
    setting(page, "Max tokens").fill("40000")
    expect(page.get_by_text(re.compile(r"^Max tokens: at most 2,047"))).to_be_visible()
    setting(page, "Temperature").fill("hot")
    expect(page.get_by_text("Temperature: a number, from 0 to 2.")).to_be_visible()
    ui.shoot("playground-out-of-range")
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.locator(".run")).to_have_count(0)  # nothing starts while a setting is out of range
    page.get_by_role("button", name="Reset to default").click()
    expect(setting(page, "Top p")).to_have_value("1")
    expect(setting(page, "Max tokens")).to_have_value("64")
    expect(page.locator(".settings .field-invalid")).to_have_count(0)

    # A Run: its text grows under the prompt, which stays as written; its tokens are buttons.
    setting(page, "Max tokens").fill("12")
    setting(page, "Temperature").fill("0.7")
    page.get_by_role("button", name="Run", exact=True).click()
    view = wait_ended(page, 1)
    expect(prompt).to_have_value(EXAMPLE)
    tokens = view.locator("button.tok")
    expect(tokens).to_have_count(12)
    expect(view).to_contain_text("12 output tokens")
    # The Heatmap: each token in one of the five bands, with the legend.
    assert all(re.search(r"\bheat-[0-4]\b", cls or "") for cls in tokens.evaluate_all("(all) => all.map(b => b.className)"))
    legend = page.get_by_role("list", name="Heatmap")
    expect(legend).to_contain_text("90% or more")
    expect(legend).to_contain_text("Under 1%")
    expect(page).to_have_url(re.compile(r"temperature"))  # the address follows the form after each change
    kept = models_of(page)
    assert kept == [{"model": kept[0]["model"], "max_tokens": "12", "temperature": "0.7"}], kept
    assert "prompt" not in page.url and "octopuses" not in page.url
    ui.shoot("playground-run")

    # Copy: the text, and the prompt with it; neither holds a mark of the heatmap.
    text = runs_of(page)[0]["choices"][0]["text"]
    view.get_by_role("button", name="Copy: Run 1").click()
    page.get_by_role("menuitem", name="The text", exact=True).click()
    expect(page.get_by_text("Copied the text.")).to_be_visible()
    assert clipboard(page) == text and "⏎" not in clipboard(page)
    view.get_by_role("button", name="Copy: Run 1").click()
    page.get_by_role("menuitem", name="The prompt and the text").click()
    assert clipboard(page) == EXAMPLE + text

    # A token by keyboard: the arrow keys move, Enter shows the likeliest tokens there.
    tokens.first.focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    expect(tokens.nth(2)).to_be_focused()
    page.keyboard.press("Enter")
    likeliest = view.get_by_role("region", name="The likeliest tokens at token 3")
    expect(likeliest).to_be_visible()
    expect(likeliest.get_by_role("button").filter(has_text="%")).not_to_have_count(0)
    ui.shoot("playground-token")
    # Another token there: the text is cut at it, the token put in, and a new Run runs on from it.
    other = likeliest.locator("button.alt:not([disabled])").first
    chosen = other.locator(".alt-token").inner_text()
    other.click()
    view2 = wait_ended(page, 2)
    expect(view2).to_contain_text("Runs on from the prompt and")
    run_on = runs_of(page)[0]["request"]
    assert run_on["prompt"].startswith(EXAMPLE) and len(run_on["prompt"]) > len(EXAMPLE), run_on
    assert {key: value for key, value in run_on.items() if key != "prompt"} == {
        key: value for key, value in runs_of(page)[1]["request"].items() if key != "prompt"}
    assert chosen.strip(), chosen

    # Turn the Heatmap off: the address says so, and the tokens lose their colours.
    setting(page, "Heatmap").uncheck()
    expect(view2.locator("button.tok.heat")).to_have_count(0)
    expect(page).to_have_url(re.compile(r"[?&]heatmap=off"))

    # Stop: a long Run stops, keeps its text, and says Stopped.
    setting(page, "Max tokens").fill("2000")
    page.get_by_role("button", name="Run", exact=True).click()
    view3 = run_view(page, 3)
    expect(view3.locator(".badge")).to_have_text("Running", timeout=RUN_WAIT_MS)
    expect(view3.locator(".run-text")).not_to_be_empty(timeout=RUN_WAIT_MS)  # the text as it grows
    page.get_by_role("button", name="Stop", exact=True).first.click()
    expect(view3.locator(".badge")).to_have_text("Stopped", timeout=RUN_WAIT_MS)
    grown = view3.locator("button.tok").count()
    assert 0 < grown < 2000, grown
    ui.shoot("playground-stopped")

    # A refusal: the output says why, and the setting at fault is marked until it changes.
    setting(page, "Max tokens").fill("4")
    setting(page, "Read Layers").fill("0, 2")
    setting(page, "Choices").fill("2")
    page.get_by_role("button", name="Run", exact=True).click()
    refusal = page.get_by_text("Set n to 1: activations and steering vectors are for one choice only.")
    expect(refusal.first).to_be_visible()
    expect(page.locator(".run-refused")).to_have_count(1)
    # The API names Read Layers (param output_residual_stream): it stays marked until it changes.
    expect(setting(page, "Read Layers")).to_have_attribute("aria-invalid", "true")
    ui.shoot("playground-refused")
    setting(page, "Choices").fill("1")
    expect(setting(page, "Read Layers")).to_have_attribute("aria-invalid", "true")
    setting(page, "Read Layers").fill("0, 1")
    expect(setting(page, "Read Layers")).not_to_have_attribute("aria-invalid", "true")

    # Steer with a .npy vector at Layer 1 and read Layers 0 and 1: the Run's Activations chart each
    # Layer's norm per token, and download in the API's encoding.
    vector = io.BytesIO()
    numpy.save(vector, numpy.linspace(-1, 1, HIDDEN_SIZE, dtype=numpy.float32))
    page.locator(".settings").get_by_label("Vector file (.npy or .safetensors)").set_input_files(
        files=[{"name": "vector.npy", "mimeType": "application/octet-stream", "buffer": vector.getvalue()}])
    expect(page.get_by_text(f"vector.npy: 1 row of {HIDDEN_SIZE} numbers.")).to_be_visible()
    page.locator(".settings .steer").get_by_label("Layers", exact=True).fill("1")
    page.locator(".settings .steer").get_by_label("Scale", exact=True).fill("2")
    setting(page, "Read Layers").fill("0, 1")
    page.get_by_role("button", name="Run", exact=True).click()
    steered = wait_ended(page, 4)
    request = runs_of(page)[0]["request"]
    assert request["apply_steering_vectors"][0]["layer_indices"] == [1] and request["output_residual_stream"] == [0, 1]
    assert "vector" not in page.url and "apply_steering_vectors" not in page.url  # never a vector in the address
    steered.get_by_text("Activations of Layers 0, 1").click()
    expect(steered.get_by_role("img", name=re.compile("The norm of each Layer"))).to_be_visible()
    with page.expect_download() as download:
        steered.get_by_role("link", name="Download the Activations").click()
    encoded = json.loads(download.value.path().read_text())["residual_stream"]
    assert encoded["compression"] == "zstd" and encoded["shape"][0] == 2, encoded
    ui.shoot("playground-activations")
    page.get_by_role("button", name="Remove the vector").click()
    setting(page, "Read Layers").fill("0, 2")

    # Share: the address opens the same settings in another browser; the prompt stays a draft here.
    expect(page).to_have_url(re.compile(r"output_residual_stream%22%3A%220%2C\+2"))
    shared = page.url
    other_ui: UI = new_ui()
    other_user = signed_in_with_key(app, other_ui, "share")
    other_ui.page.goto(shared)
    expect(setting(other_ui.page, "Temperature")).to_have_value("0.7")
    expect(setting(other_ui.page, "Read Layers")).to_have_value("0, 2")
    expect(other_ui.page.get_by_label("Prompt", exact=True)).to_have_value("")
    other_ui.check()
    assert other_user.email != user.email

    # Playground in the navigation opens the last address; a reload keeps the draft.
    page.get_by_role("link", name="Usage", exact=True).click()
    expect(page).to_have_url(re.compile(rf"{PREFIX}/usage"))
    page.get_by_role("link", name="Playground", exact=True).click()
    expect(page).to_have_url(shared)
    page.reload()
    expect(page.get_by_label("Prompt", exact=True)).to_have_value(EXAMPLE)
    # The newest Run shows again above the table.
    expect(page.locator(".run").first).to_be_visible()

    # Sign out forgets the draft and the address.
    sign_out(ui, user)
    assert page.evaluate("() => [localStorage.getItem('acs-playground-draft'), localStorage.getItem('acs-playground-address')]") == [None, None]
    ui.sign_in(user)
    expect(page).to_have_url(re.compile(rf"{PREFIX}/playground(\?|$)"))
    expect(page.get_by_label("Prompt", exact=True)).to_have_value("")
    expect(setting(page, "Temperature")).to_have_value("1")
    ui.check()


# -- Compare, the Runs table, export ---------------------------------------------------------------

def test_compare_six_models_and_the_runs_table(app: App, new_ui: Any, tmp_path: Any) -> None:
    ui: UI = new_ui()
    page = ui.page
    signed_in_with_key(app, ui, "compare")
    page.get_by_label("Prompt", exact=True).fill("Once upon a time")
    setting(page, "Max tokens").fill("8")
    setting(page, "Temperature").fill("0")

    # Compare starts with a copy of the one model; Add model up to 6.
    page.get_by_role("button", name="Compare", exact=True).click()
    models = page.get_by_role("region", name="Models")
    expect(models.locator(".model-card")).to_have_count(2)
    page.get_by_role("button", name="Duplicate model 2").click()
    for _ in range(3):
        page.get_by_role("button", name="Add model").click()
    expect(models.locator(".model-card")).to_have_count(6)
    expect(page.get_by_role("button", name="Add model")).to_be_disabled()
    page.get_by_role("button", name="Remove model 6").click()
    page.get_by_role("button", name="Add model").click()
    # Each model has its own settings: model 2 samples at a temperature, models 4 to 6 are new.
    page.get_by_role("button", name="Change the settings of model 2").click()
    expect(page.get_by_role("heading", name="Settings of model 2")).to_be_visible()
    setting(page, "Temperature").fill("1.5")
    setting(page, "Seed").fill("7")
    for n in (4, 5, 6):
        page.get_by_role("button", name=f"Change the settings of model {n}").click()
        setting(page, "Max tokens").fill("8")
    expect(page).to_have_url(re.compile(r"[?&]view=compare"))
    assert len(models_of(page)) == 6
    ui.shoot("compare-models")

    page.get_by_role("button", name="Run all").click()
    views = page.locator(".run-grid > .run")
    expect(views).to_have_count(6)
    for number in range(1, 7):
        wait_ended(page, number)
    # Each Run shows how its settings differ; those with the same prompt say how many first tokens match.
    expect(run_view(page, 2)).to_contain_text("Temperature 1.5")
    expect(run_view(page, 2)).to_contain_text("Seed 7")
    expect(run_view(page, 3)).to_contain_text("8 first tokens match Run 1's.")
    group = page.get_by_role("row").filter(has_text="Comparison of runs 1, 2, 3, 4, 5 and 6")
    expect(group).to_be_visible()
    ui.shoot("compare-runs")

    # Stop all stops every Run of the group.
    for n in range(1, 7):
        page.get_by_role("button", name=f"Change the settings of model {n}").click()
        setting(page, "Max tokens").fill("2000")
    page.get_by_role("button", name="Run all").click()
    expect(run_view(page, 7).locator(".run-text")).not_to_be_empty(timeout=RUN_WAIT_MS)
    page.get_by_role("button", name="Stop all").click()
    for number in range(7, 13):
        expect(run_view(page, number).locator(".badge")).to_have_text(re.compile("Stopped|Completed"), timeout=RUN_WAIT_MS)
    expect(page.get_by_role("button", name="Stop all")).to_have_count(0)

    # The Runs table: choose two, compare them side by side, export them.
    page.get_by_role("checkbox", name="Choose run 1", exact=True).check()
    page.get_by_role("checkbox", name="Choose run 2", exact=True).check()
    page.get_by_role("button", name="Compare 2 runs").click()
    expect(views).to_have_count(2)
    with page.expect_download() as download:
        page.get_by_role("button", name="Export chosen").click()
        page.get_by_role("menuitem", name="JSON", exact=True).click()
    chosen = json.loads(download.value.path().read_text())
    assert [run["number"] for run in chosen] == [1, 2], chosen
    assert chosen[0]["request"]["prompt"] == "Once upon a time"
    assert chosen[0]["completion"]["object"] == "text_completion" and chosen[0]["completion"]["choices"][0]["text"]
    with page.expect_download() as download:
        page.get_by_role("button", name="Export every run").click()
        page.get_by_role("menuitem", name="JSONL", exact=True).click()
    lines = [json.loads(line) for line in download.value.path().read_text().splitlines()]
    # One line for each choice: every Run of the first Run all has one (a stopped one may have none).
    assert set(range(1, 7)) <= {line["run_number"] for line in lines}, lines
    with page.expect_download() as download:
        page.get_by_role("button", name="Export the Runs in view").click()
        page.get_by_role("menuitem", name="Text", exact=True).click()
    assert "Once upon a time" in download.value.path().read_text()
    ui.shoot("runs-table")

    # The row menu: Copy as API request is a streaming curl that reads $ACS_API_KEY and holds no key.
    row_action(page, 2, "Copy as API request")
    curl = clipboard(page)
    assert "$ACS_API_KEY" in curl and "sk-acs" not in curl and '"stream":true' in curl and '"seed":7' in curl, curl
    row_action(page, 2, "Copy settings")
    assert json.loads(clipboard(page)) == {"model": chosen[1]["request"]["model"], "max_tokens": 8,
                                            "temperature": 1.5, "seed": 7, "logprobs": 5}
    row_action(page, 2, "Copy prompt")
    assert clipboard(page) == "Once upon a time"

    # Delete asks first, with Delete run; the Run leaves the table at once.
    row_action(page, 3, "Delete")
    dialog = page.get_by_role("dialog", name="Delete run 3?")
    expect(dialog).to_be_visible()
    ui.shoot("runs-delete")
    dialog.get_by_role("button", name="Delete run").click()
    expect(page.get_by_role("button", name="Show run 3", exact=True)).to_have_count(0)
    expect(page.get_by_role("row").filter(has_text="Comparison of runs 1, 2, 4, 5 and 6")).to_be_visible()

    # Restore brings the comparison back into the form: each Run's settings, with its seed.
    page.get_by_label("Prompt", exact=True).fill("")
    page.get_by_role("button", name="Single", exact=True).click()
    page.get_by_role("row").filter(has_text="Comparison of runs 1, 2, 4, 5 and 6").get_by_role("button", name="Restore").click()
    expect(page.get_by_role("button", name="Compare", exact=True)).to_have_attribute("aria-pressed", "true")
    expect(models.locator(".model-card")).to_have_count(5)
    expect(page.get_by_label("Prompt", exact=True)).to_have_value("Once upon a time")
    page.get_by_role("button", name="Change the settings of model 2").click()
    expect(setting(page, "Seed")).to_have_value("7")
    expect(views).to_have_count(5)
    ui.shoot("runs-restored")
    ui.check()


def test_a_run_goes_on_after_its_tab_closes(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    page = ui.page
    signed_in_with_key(app, ui, "follow")
    page.get_by_label("Prompt", exact=True).fill("A long way from home")
    setting(page, "Max tokens").fill("600")
    page.get_by_role("button", name="Run", exact=True).click()
    expect(run_view(page, 1).locator(".run-text")).not_to_be_empty(timeout=RUN_WAIT_MS)
    address_now = page.url
    page.close()

    # Another tab of the same browser follows the Run on to its end.
    ui.page = ui.context.new_page()
    ui.page.goto(address_now)
    view = wait_ended(ui.page, 1)
    expect(view).to_contain_text("600 output tokens")
    ui.shoot("followed")
    ui.check()
