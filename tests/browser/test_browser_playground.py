"""The Playground in a real browser (spec: "Use the Playground"), on the test profile's tiny model:
sign-in with a key opens it; a prompt with the gray example, settings marked out of range as you
type, a Run that streams and one that stops, its tokens and heatmap, Copy, a token's re-run, a
refusal with its setting marked (a Layer that the model does not have), Steer from a .npy or
.safetensors file or pasted base64 (Layers, scale, norm match, spans), the settings in the
address and the prompt as a draft; Compare of 6 models with Run all and Stop all, the Runs table
with its columns and row menu, Compare 2 runs, the export files read back (JSONL by pandas) in
the API's shapes, a copied curl that runs, Restore that waits while a Run runs, with nothing run
until Run all; the heatmap's bands and its ⏎ and ⇥ marks, which a copy leaves out, and a katakana
token that axe-core reads; and a Run followed after its tab closed.

The page is found by the spec's names alone (roles, labels, exact button names), as a reader of
the guide finds it: a name that two controls share fails Playwright's strict mode. Each page is
shot at 1280 and 390 px and checked by axe-core (conftest.py)."""
from __future__ import annotations

import base64
import io
import json
import math
import os
import re
import subprocess
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import numpy
import pandas
from playwright.sync_api import expect

from tests.browser.conftest import PREFIX, App, UI, User, drawn, tab_to
from tests.browser.page_calls import ok

EXAMPLE = "The three most surprising facts about octopuses are"
RUN_WAIT_MS = 120_000
BANDS = ("90% or more", "50% to 90%", "10% to 50%", "1% to 10%", "Under 1%")
HIDDEN_SIZE = 64  # the tiny model's (configs/models/tiny-llama.yaml)  # a Run on the CPU's tiny model: its model is Warm, its tokens come fast


def make_key(ui: UI, name: str = "laptop") -> str:
    """A key made through the App's own route (API Keys' dialog has its own tests); the key."""
    return ok(ui.page, "POST", "account/keys", {"name": name}, status=201)["key"]


def sign_out(ui: UI, user: User) -> None:
    page = ui.page
    page.get_by_role("button", name=f"{user.name}: account menu").click()
    page.get_by_role("menuitem", name="Sign out").click()
    expect(page).to_have_url(re.compile(rf"{PREFIX}/sign-in"))


def signed_in_with_key(app: App, ui: UI, tag: str) -> tuple[User, str]:
    """A User with a key, signed in: the Playground opens (spec: "Sign in"). The User and the key."""
    user = app.approved_user(tag)
    ui.first_sign_in(user)
    key = make_key(ui)
    sign_out(ui, user)
    ui.sign_in(user)
    expect(ui.page).to_have_url(re.compile(rf"{PREFIX}/playground(\?|$)"))
    expect(ui.page.get_by_role("heading", name="Playground", level=1)).to_be_visible()
    return user, key


def keys_of(value: Any) -> Any:
    """The shape of a JSON value: each object's keys, down through its first list item."""
    if isinstance(value, dict):  # top_logprobs' dicts are keyed by the tokens themselves
        return {key: "tokens" if key == "top_logprobs" else keys_of(item) for key, item in value.items()}
    if isinstance(value, list):
        return [keys_of(value[0])] if value else []
    return type(value).__name__


def setting(page: Any, label: str) -> Any:
    """A setting of the form, by its label alone: every setting is in view, and no other control
    of the page has its name."""
    return page.get_by_label(label, exact=True)


def button(scope: Any, name: str) -> Any:
    return scope.get_by_role("button", name=name, exact=True)


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
    """The User's Runs as the App's own route lists them, newest first (without log probabilities)."""
    return page.evaluate("async () => (await (await fetch('account/runs')).json()).data")


def run_of(page: Any, run_id: str) -> dict[str, Any]:
    """One Run as the App's own route reads it, with its log probabilities."""
    return page.evaluate("async (id) => (await (await fetch(`account/runs/${id}`)).json())", run_id)


def row_action(page: Any, number: int, action: str) -> None:
    page.get_by_role("button", name=f"Actions of run {number}", exact=True).click()
    page.get_by_role("menuitem", name=action, exact=True).click()


# -- Run a prompt ---------------------------------------------------------------------------------

def test_a_run_streams_stops_and_keeps_its_settings_in_the_address(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    page = ui.page
    user, _ = signed_in_with_key(app, ui, "play")
    nav = page.get_by_role("navigation", name="The App").locator(".nav-pages a")
    expect(nav).to_have_text(["Playground", "Loom", "Usage", "Jobs", "API Keys"])  # the spec's order
    ui.shoot("playground-new")
    # The model list shows each model's name; hovering shows its id, which the API takes as `model`.
    model = setting(page, "Model")
    expect(model).to_have_attribute("title", "tiny-llama")
    expect(model.locator("option:checked")).to_have_attribute("title", "tiny-llama")

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
    tokens = view.locator(".tok")
    expect(tokens).to_have_count(12)
    expect(view).to_contain_text("12 output tokens")
    # The Heatmap: each token in one of the five bands, with the legend.
    assert all(re.search(r"\bheat-[0-4]\b", cls or "") for cls in tokens.evaluate_all("(all) => all.map(b => b.className)"))
    for band in BANDS:
        expect(page.get_by_text(band, exact=True)).to_be_visible()
    expect(page).to_have_url(re.compile(r"temperature"))  # the address follows the form after each change
    kept = models_of(page)
    assert kept == [{"model": kept[0]["model"], "max_tokens": "12", "temperature": "0.7"}], kept
    assert "prompt" not in page.url and "octopuses" not in page.url
    ui.shoot("playground-run")

    # Copy: the text, and the prompt with it; neither holds a mark of the heatmap.
    text = runs_of(page)[0]["choices"][0]["text"]
    button(view, "Copy").click()
    page.get_by_role("menuitem", name="The text", exact=True).click()
    expect(page.get_by_text("Copied the text.")).to_be_visible()
    assert clipboard(page) == text and "⏎" not in clipboard(page)
    button(view, "Copy").click()
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
    # The likeliest other token is the first that can be chosen, with its probability.
    first = run_of(page, runs_of(page)[0]["id"])
    logprobs = first["choices"][0]["logprobs"]
    others = sorted(((lp, token) for token, lp in logprobs["top_logprobs"][2].items() if token != logprobs["tokens"][2]),
                    reverse=True)
    likeliest.locator("button:not([disabled])").filter(has_text="%").first.click()
    view2 = wait_ended(page, 2)
    expect(view2).to_contain_text("Runs on from the prompt and")
    run_on = runs_of(page)[0]["request"]
    assert run_on["prompt"] == EXAMPLE + "".join(logprobs["tokens"][:2]) + others[0][1], (run_on, logprobs["tokens"][:3])
    assert {key: value for key, value in run_on.items() if key != "prompt"} == {
        key: value for key, value in first["request"].items() if key != "prompt"}
    expect(prompt).to_have_value(EXAMPLE)  # the prompt box stays as written

    # Turn the Heatmap off: the address says so, and the tokens lose their colours.
    setting(page, "Heatmap").uncheck()
    expect(view2.locator(".tok.heat")).to_have_count(0)
    expect(page).to_have_url(re.compile(r"[?&]heatmap=off"))

    # Stop: a long Run stops, keeps its text, and says Stopped.
    setting(page, "Max tokens").fill("2000")
    page.get_by_role("button", name="Run", exact=True).click()
    view3 = run_view(page, 3)
    expect(view3.locator(".badge")).to_have_text("Running", timeout=RUN_WAIT_MS)
    expect(view3.locator(".run-text")).not_to_be_empty(timeout=RUN_WAIT_MS)  # the text as it grows
    button(page, "Stop").click()  # one Stop: the page's, for its one Run
    expect(view3.locator(".badge")).to_have_text("Stopped", timeout=RUN_WAIT_MS)
    grown = view3.locator(".tok").count()
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
    # A Layer that the model does not have: the API refuses it, the output says why in its words,
    # nothing runs, and Read Layers stays marked until it changes.
    setting(page, "Read Layers").fill("0, 7")
    expect(setting(page, "Read Layers")).not_to_have_attribute("aria-invalid", "true")  # the API's to judge
    started = len(runs_of(page))
    button(page, "Run").click()
    lacks = re.compile(r"has Layers 0 to 3: it has no Layer 7\.")
    expect(page.locator(".output").get_by_text(lacks)).to_be_visible()
    expect(setting(page, "Read Layers")).to_have_attribute("aria-invalid", "true")
    expect(setting(page, "Read Layers")).to_be_focused()
    assert len(runs_of(page)) == started
    setting(page, "Max tokens").fill("5")
    expect(setting(page, "Read Layers")).to_have_attribute("aria-invalid", "true")  # another setting changed
    setting(page, "Read Layers").fill("0, 1")
    expect(setting(page, "Read Layers")).not_to_have_attribute("aria-invalid", "true")
    setting(page, "Max tokens").fill("4")

    # Steer with a .npy vector at Layer 1 and read Layers 0 and 1: the Run's Activations chart each
    # Layer's norm per token, and download in the API's encoding.
    vector = io.BytesIO()
    numpy.save(vector, numpy.linspace(-1, 1, HIDDEN_SIZE, dtype=numpy.float32))
    setting(page, "Steer").set_input_files(
        files=[{"name": "vector.npy", "mimeType": "application/octet-stream", "buffer": vector.getvalue()}])
    expect(page.get_by_text(f"vector.npy: 1 row of {HIDDEN_SIZE} numbers.")).to_be_visible()
    steer = page.get_by_role("group", name="Steer")
    steer.get_by_label("Layers", exact=True).fill("1")
    steer.get_by_label("Scale", exact=True).fill("2")
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
    # Pasted base64 of float32 numbers, steering a span of positions with its norm matched.
    pasted = numpy.linspace(1, -1, HIDDEN_SIZE, dtype=numpy.float32)
    steer.get_by_label("Or paste base64", exact=True).fill(base64.b64encode(pasted.tobytes()).decode())
    expect(page.get_by_text(f"The pasted vector: 1 row of {HIDDEN_SIZE} numbers.")).to_be_visible()
    steer.get_by_label("Layers", exact=True).fill("1")
    steer.get_by_label("Norm match", exact=True).check()
    steer.get_by_role("radio", name="Spans", exact=True).check()
    steer.get_by_role("textbox", name="Spans", exact=True).fill("0-2")
    button(page, "Run").click()
    wait_ended(page, 5)
    assert runs_of(page)[0]["request"]["apply_steering_vectors"] == [
        {"activations": [pasted.tolist()], "layer_indices": [1], "scale": 1, "norm_match": True, "position_spans": [[0, 2]]}]
    # A .safetensors file of one tensor, a row for each of two Layers, at every position.
    page.get_by_role("button", name="Remove the vector").click()
    rows = numpy.stack([numpy.full(HIDDEN_SIZE, 0.5, numpy.float32), numpy.full(HIDDEN_SIZE, -0.25, numpy.float32)])
    header = json.dumps({"v": {"dtype": "F32", "shape": list(rows.shape), "data_offsets": [0, rows.nbytes]}}).encode()
    header += b" " * (-len(header) % 8)
    setting(page, "Steer").set_input_files(files=[{"name": "rows.safetensors", "mimeType": "application/octet-stream",
                                                   "buffer": len(header).to_bytes(8, "little") + header + rows.tobytes()}])
    expect(page.get_by_text(f"rows.safetensors: 2 rows of {HIDDEN_SIZE} numbers.")).to_be_visible()
    steer.get_by_label("Layers", exact=True).fill("0, 1")
    button(page, "Run").click()
    wait_ended(page, 6)
    assert runs_of(page)[0]["request"]["apply_steering_vectors"] == [
        {"activations": rows.tolist(), "layer_indices": [0, 1], "scale": 1}]
    page.get_by_role("button", name="Remove the vector").click()
    setting(page, "Read Layers").fill("0, 2")

    # Share: the address opens the same settings in another browser; the prompt stays a draft here.
    expect(page).to_have_url(re.compile(r"output_residual_stream%22%3A%220%2C\+2"))
    shared = page.url
    other_ui: UI = new_ui()
    other_user, _ = signed_in_with_key(app, other_ui, "share")
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
    _, key = signed_in_with_key(app, ui, "compare")
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
    # Restore waits until no Run of the page is running.
    running = page.get_by_role("row").filter(has_text="Comparison of runs 7, 8, 9, 10, 11 and 12")
    expect(button(running, "Restore")).to_be_disabled()
    expect(running).to_contain_text("Restore waits until no Run of the page is running.")
    page.get_by_role("button", name="Stop all").click()
    for number in range(7, 13):
        expect(run_view(page, number).locator(".badge")).to_have_text(re.compile("Stopped|Completed"), timeout=RUN_WAIT_MS)
    expect(page.get_by_role("button", name="Stop all")).to_have_count(0)
    expect(button(running, "Restore")).to_be_enabled()
    expect(running).not_to_contain_text("Restore waits")

    # The Runs table's columns: number, status, model, settings, text, tokens and time.
    expect(page.get_by_role("table", name="Runs, newest first").get_by_role("columnheader")).to_have_text(
        ["Choose", "Run", "Status", "Model", "Settings", "Text", "Tokens", "Time", "Actions"])

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
    # The request and the Completion keep the API's own shapes: those of POST /v1/completions.
    request = {k: v for k, v in chosen[0]["request"].items() if k != "stream"}
    answer = httpx.post(f"{app.v1}/completions", json=request, headers={"Authorization": f"Bearer {key}"}, timeout=300)
    assert answer.status_code == 200, answer.text
    api = answer.json()
    assert keys_of(chosen[0]["completion"]) == keys_of(api), (chosen[0]["completion"], api)
    assert chosen[0]["completion"]["choices"][0]["text"] == api["choices"][0]["text"]  # temperature 0
    assert set(chosen[0]) >= {"request", "completion", "usage", "status"} and chosen[0]["status"] == "completed"
    assert chosen[0]["usage"] == chosen[0]["completion"]["usage"] and set(api["usage"]) == set(chosen[0]["usage"])

    # Export every run, JSONL: one line for each choice, as pandas reads it; every Run, oldest first.
    every = runs_of(page)
    with page.expect_download() as download:
        button(page, "Export every run").click()
        page.get_by_role("menuitem", name="JSONL", exact=True).click()
    table = pandas.read_json(download.value.path(), lines=True)
    texts = {run["number"]: run["choices"] for run in every}
    assert table.shape[0] == sum(len(choices) for choices in texts.values()), table
    assert {"run_number", "index", "prompt", "text", "logprobs", "request"} <= set(table.columns), table.columns
    assert list(table["run_number"]) == sorted(table["run_number"]), list(table["run_number"])
    for row in table.to_dict("records"):
        assert row["text"] == texts[row["run_number"]][row["index"]]["text"] and row["prompt"] == "Once upon a time", row
    assert set(table["logprobs"].iloc[0]) == set(api["choices"][0]["logprobs"]), table["logprobs"].iloc[0]
    # Export, at the head of the output, as Text: the Runs in view, each with its prompt, to read.
    with page.expect_download() as download:
        button(page, "Export").click()
        page.get_by_role("menuitem", name="Text", exact=True).click()
    text_file = download.value.path().read_text()
    for run in chosen:
        assert f"Once upon a time{run['completion']['choices'][0]['text']}" in text_file, text_file
    assert text_file.index("Run 1,") < text_file.index("Run 2,") and "Run 3," not in text_file, text_file
    ui.shoot("runs-table")
    # At 1280 px every column of the table is in view, without scrolling sideways.
    widths = page.get_by_role("region", name="The Runs table").evaluate("(element) => [element.scrollWidth, element.clientWidth]")
    assert widths[0] <= widths[1], widths

    # The row menu: Copy as API request is a streaming curl that reads $ACS_API_KEY and holds no key.
    row_action(page, 2, "Copy as API request")
    curl = clipboard(page)
    assert "$ACS_API_KEY" in curl and key not in curl and "sk-" not in curl, curl
    assert '"stream":true' in curl and '"seed":7' in curl and '"n":' not in curl, curl  # no field at its default
    # The command runs as it is, with the key from the shell: curl prints the events as they come.
    done = subprocess.run(["bash", "-c", curl], env={**os.environ, "ACS_API_KEY": key},
                          capture_output=True, text=True, timeout=300)
    events = [line[len("data: "):] for line in done.stdout.splitlines() if line.startswith("data: ")]
    assert done.returncode == 0 and events[-1] == "[DONE]", (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert json.loads(events[0])["object"] == "text_completion"
    row_action(page, 2, "Copy settings")
    assert json.loads(clipboard(page)) == {"model": chosen[1]["request"]["model"], "max_tokens": 8,
                                            "temperature": 1.5, "seed": 7, "logprobs": 5}
    row_action(page, 2, "Copy prompt")
    assert clipboard(page) == "Once upon a time"
    row_action(page, 2, "Copy output")
    assert clipboard(page) == chosen[1]["completion"]["choices"][0]["text"]
    # Show shows the Run alone, as a select on its row does.
    row_action(page, 4, "Show")
    expect(views).to_have_count(1)
    expect(views.first).to_have_accessible_name("Run 4")
    # Use these settings puts the Run's model, settings and prompt back into the form; the Run then
    # says how the settings on screen differ from its own.
    button(page, "Single").click()
    page.get_by_label("Prompt", exact=True).fill("Something else")
    row_action(page, 2, "Use these settings")
    expect(page.get_by_label("Prompt", exact=True)).to_have_value("Once upon a time")
    expect(setting(page, "Temperature")).to_have_value("1.5")
    expect(setting(page, "Seed")).to_have_value("7")
    expect(views).to_have_count(1)
    expect(views.first).to_have_accessible_name("Run 2")
    setting(page, "Temperature").fill("0.5")
    views.first.get_by_text("The settings on screen differ from this Run's").click()
    expect(views.first).to_contain_text("Temperature: 1.5 in this Run, 0.5 on screen")

    # Delete asks first, with Delete run; the Run leaves the table at once.
    row_action(page, 3, "Delete")
    dialog = page.get_by_role("dialog", name="Delete run 3?")
    expect(dialog).to_be_visible()
    ui.shoot("runs-delete")
    dialog.get_by_role("button", name="Delete run").click()
    expect(page.get_by_role("button", name="Show run 3", exact=True)).to_have_count(0)
    expect(page.get_by_role("row").filter(has_text="Comparison of runs 1, 2, 4, 5 and 6")).to_be_visible()

    # Restore brings the comparison back into the form: each Run's settings, with its seed, the
    # prompt, and the Runs side by side. Nothing runs until Run all. On a phone, the group's row
    # keeps its name and Restore in view, however wide the table.
    page.get_by_label("Prompt", exact=True).fill("")
    restored = [run for run in runs_of(page) if run["number"] in (1, 2, 4, 5, 6)][::-1]
    group = page.get_by_role("row").filter(has_text="Comparison of runs 1, 2, 4, 5 and 6")
    page.set_viewport_size({"width": 390, "height": 844})
    group.scroll_into_view_if_needed()
    box = button(group, "Restore").bounding_box()
    assert box["x"] + box["width"] <= 390 and drawn(button(group, "Restore")), box
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    page.set_viewport_size({"width": 1280, "height": 800})
    button(group, "Restore").click()
    expect(button(page, "Compare")).to_have_attribute("aria-pressed", "true")
    expect(models.locator(".model-card")).to_have_count(5)
    expect(page.get_by_label("Prompt", exact=True)).to_have_value("Once upon a time")
    page.get_by_role("button", name="Change the settings of model 2").click()
    expect(setting(page, "Seed")).to_have_value("7")
    expect(setting(page, "Temperature")).to_have_value("1.5")
    expect(views).to_have_count(5)
    for view, run in zip(views.all(), restored):
        expect(view).to_have_accessible_name(f"Run {run['number']}")
    ui.shoot("runs-restored")
    page.wait_for_timeout(1000)
    assert len(runs_of(page)) == 11  # the 12 of two Run alls, less the deleted one: nothing new ran
    # Run all runs each model with the settings of its Run, with its seed (one that the API chose
    # where the request left Seed blank): the same requests again, so the same texts.
    button(page, "Run all").click()
    for number in range(13, 18):
        wait_ended(page, number)
    again = [run for run in runs_of(page) if run["number"] >= 13][::-1]
    assert [run["request"] for run in again] == [{**run["request"], "seed": run["seed"]} for run in restored], (
        again, restored)
    assert [run["seed"] for run in again] == [run["seed"] for run in restored]

    # A model that the API refuses says why in its place, beside the Runs that started; its setting
    # at fault is marked.
    page.get_by_role("button", name="Change the settings of model 3").click()
    setting(page, "Read Layers").fill("9")
    button(page, "Run all").click()
    refused = page.get_by_role("article", name="Model 3: not started")
    expect(refused).to_contain_text("has Layers 0 to 3: it has no Layer 9.")
    expect(views).to_have_count(5)
    expect(views.nth(2)).to_have_accessible_name("Model 3: not started")
    for number in range(18, 22):
        wait_ended(page, number)
    expect(setting(page, "Read Layers")).to_have_attribute("aria-invalid", "true")
    ui.shoot("compare-refused")
    ui.check()


# -- Tokens and the heatmap -----------------------------------------------------------------------

def test_the_heatmap_bands_its_marks_and_a_copy_without_them(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    page = ui.page
    signed_in_with_key(app, ui, "heat")
    # Echo the prompt: its line break and tab come back as tokens of the text; the first line ends
    # in more spaces than its width holds.
    page.get_by_label("Prompt", exact=True).fill("Dear Sir," + " " * 160 + "\n\tThank you")
    setting(page, "Max tokens").fill("6")
    setting(page, "Echo").check()
    button(page, "Run").click()
    view = wait_ended(page, 1)
    choice = run_of(page, runs_of(page)[0]["id"])["choices"][0]
    shown = "".join(choice["logprobs"]["tokens"])
    assert "\n\t" in shown, choice

    # Each token is a button, coloured as its band of the legend; the five bands, in order.
    text = view.get_by_role("group", name="The text of Run 1")
    tokens = text.get_by_role("button")
    expect(tokens).to_have_count(len(choice["logprobs"]["tokens"]))
    legend = page.get_by_role("list", name="Bands of probability").get_by_role("listitem")
    expect(legend).to_have_text(list(BANDS))
    swatches = legend.locator("[aria-hidden=true]").evaluate_all(
        "(all) => all.map((swatch) => getComputedStyle(swatch).backgroundColor)")
    assert len(set(swatches)) == 5, swatches
    colours = tokens.evaluate_all("(all) => all.map((token) => getComputedStyle(token).backgroundColor)")
    for logprob, colour in zip(choice["logprobs"]["token_logprobs"], colours):
        if logprob is not None:  # the first token of an echoed prompt has none
            p = math.exp(logprob)
            band = next(i for i, floor in enumerate((0.9, 0.5, 0.1, 0.01, 0)) if p >= floor)
            assert colour == swatches[band], (logprob, colour, swatches)

    # The heatmap marks the line break with ⏎ and the tab with ⇥; a copy leaves both out. The line
    # break still breaks the line: the token after it starts lower down.
    expect(text).to_contain_text("⏎")
    expect(text).to_contain_text("⇥")
    at = next(i for i, token in enumerate(choice["logprobs"]["tokens"]) if "\n" in token)
    assert tokens.nth(at + 1).bounding_box()["y"] > tokens.nth(at).bounding_box()["y"] + 5
    # ...and no token, the spaces at a line's end included, reaches past the text's box.
    right = text.bounding_box()["x"] + text.bounding_box()["width"]
    assert all(box["x"] + box["width"] <= right + 1 for box in tokens.evaluate_all(
        "(all) => all.flatMap((token) => [...token.getClientRects()].map((r) => ({x: r.x, width: r.width})))")), right
    button(view, "Copy").click()
    page.get_by_role("menuitem", name="The text", exact=True).click()
    assert clipboard(page) == choice["text"], clipboard(page)
    button(view, "Copy").click()  # with echo, the text holds its prompt already
    page.get_by_role("menuitem", name="The prompt and the text", exact=True).click()
    assert clipboard(page) == choice["text"], clipboard(page)
    text.evaluate("""(element) => {
        const range = document.createRange();
        range.selectNodeContents(element);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
    }""")
    page.keyboard.press("Control+c")
    assert clipboard(page) == shown, (clipboard(page), shown)
    ui.shoot("heatmap")

    # The keyboard: one Tab stop in the text; End, the arrows and Enter show the likeliest tokens.
    page.evaluate("() => getSelection().removeAllRanges()")
    tab_to(page, tokens.first)
    page.keyboard.press("End")
    expect(tokens.last).to_be_focused()
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("Enter")
    count = len(choice["logprobs"]["tokens"])
    likeliest = view.get_by_role("region", name=f"The likeliest tokens at token {count - 1}")
    expect(likeliest).to_be_visible()
    expect(tokens.nth(count - 2)).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("Tab")
    assert not text.evaluate("(element) => element.contains(document.activeElement)")  # out of the text

    # Without the Heatmap, the tokens have no colour and no marks.
    setting(page, "Heatmap").uncheck()
    expect(text).not_to_contain_text("⏎")
    colours = tokens.evaluate_all("(all) => all.map((token) => getComputedStyle(token).backgroundColor)")
    assert not set(colours) & set(swatches), colours

    # A Run that asks for no log probabilities (Top logprobs shown 0) shows plain text: no buttons.
    setting(page, "Heatmap").check()
    setting(page, "Top logprobs shown").fill("0")
    setting(page, "Choices").fill("2")
    button(page, "Run").click()
    plain = wait_ended(page, 2)
    expect(plain.get_by_role("button", name="Copy", exact=True)).to_have_count(1)
    expect(plain.get_by_role("button")).to_have_count(1)  # Copy alone
    expect(plain).to_contain_text("Thank you")
    expect(page.get_by_text("90% or more", exact=True)).to_have_count(0)  # no legend without log probabilities
    # Copy output copies each choice under its number when the Run has several.
    first, second = runs_of(page)[0]["choices"]
    row_action(page, 2, "Copy output")
    assert clipboard(page) == f"Choice 1\n{first['text']}\n\nChoice 2\n{second['text']}", clipboard(page)

    # A token of a script that axe-core splits into words its own way (katakana, such as a drawn
    # "ーナ"): its name is its text and its share as hidden text, with no aria-label for the visible
    # text to match (3213c7e; an aria-label failed label-content-name-mismatch, serious). The page's
    # own TokenText renders it, beside the App, for shoot()'s axe-core at both widths.
    page.evaluate("""async () => {
        const at = (path) => new URL(path, document.baseURI).href;
        const { h, render } = await import(at("app-static/vendor/preact.module.js"));
        const { TokenText } = await import(at("app-static/js/playground/tokens.js"));
        const holder = document.createElement("div");
        document.body.append(holder);
        const choice = { text: "ーナル", logprobs: { tokens: ["ーナ", "ル"], token_logprobs: [-0.1, -3],
            top_logprobs: [{ "ーナ": -0.1 }, { "ル": -3 }] } };
        render(h(TokenText, { choice, heatmap: true, selected: null, onSelect: () => {}, label: "Katakana tokens" }), holder);
    }""")
    katakana = page.get_by_role("group", name="Katakana tokens").get_by_role("button")
    expect(katakana).to_have_count(2)
    # Chromium puts a space before the hidden share: its box is apart from the token's text.
    expect(katakana.first).to_have_accessible_name(re.compile(r"^ーナ ?, 90\.5%$"))
    ui.shoot("token-katakana")
    ui.check()


def test_a_run_goes_on_after_its_tab_closes(app: App, new_ui: Any) -> None:
    ui: UI = new_ui()
    page = ui.page
    signed_in_with_key(app, ui, "follow")
    page.get_by_label("Prompt", exact=True).fill("A long way from home")
    setting(page, "Max tokens").fill("600")
    # The same 600 tokens each run: axe-core once found an unseeded run's random token (a
    # label-content-name-mismatch on "ーナ") that the runs before had not drawn.
    setting(page, "Seed").fill("11")
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

    # Usage counts the Run as the source Playground, with no key.
    ui.page.get_by_role("link", name="Usage", exact=True).click()
    by_source = ui.page.get_by_role("table", name="By source")
    expect(by_source.get_by_role("row").filter(has_text="Playground")).to_contain_text("600")
    recent = ui.page.get_by_role("table", name="Completions, newest 100").get_by_role("row").filter(has_text="Playground")
    expect(recent).to_have_count(1)
    expect(recent.get_by_role("cell").nth(3)).to_have_text("—")  # Key: a Run uses no API key
    ui.check()
