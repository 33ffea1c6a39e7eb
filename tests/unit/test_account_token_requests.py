"""The App's Request more tokens (spec: "Ask for more tokens"): a User asks through the route, an admin
decides with `token-request approve|reject`, and the User reads the decision in Your requests and the
Grant on Usage."""
from __future__ import annotations

import asyncio
import json

import pytest

from cluster.admin_cli import commands as admin
from domain.operations.arguments import MAX_TOKENS
from tests.ledger_fixtures import command_line
from tests.own_account import OwnAccount, sign_in
from tests.spec import assert_error

FORM = {"tokens": "2.5M", "models": ["llama-8b"], "project": "Refusal directions",
        "planned_usage": "Activations of 20,000 prompts at 4 Layers."}
WAITING = "You have a request waiting. Once an admin decides it, you can ask again."
UNREADABLE = "Write the tokens as a number, such as 50K or 2.5M."


def _cli(stack, capsys):
    url = stack.services.sessions.kw["bind"].url.render_as_string(hide_password=False)
    config = admin.AdminConfig(database_url=url, operator="ops")
    return command_line(config, capsys)


async def _ask(account: OwnAccount, **changes) -> dict:
    return await account.ok("POST", "/account/token-requests", {**FORM, **changes}, status=201)


async def test_a_request_is_sent_and_listed_as_waiting(fake_stack):
    account = await sign_in(fake_stack, key_name=None)
    assert await account.ok("GET", "/account/token-requests") == {"data": []}
    sent = await _ask(account, how_you_got_the_number="2,000 prompts cost 250K", links="https://example.org/paper")
    assert {k: v for k, v in sent.items() if k not in ("id", "created_at")} == {
        "tokens": 2_500_000, "granted": None, "status": "waiting", "note": "", "models": ["tiny-llama"],
        "project": "Refusal directions", "decided_at": None}
    assert await account.ok("GET", "/account/token-requests") == {"data": [sent]}


@pytest.mark.parametrize("written, tokens", [("50K", 50_000), ("2.5M", 2_500_000), ("2500000", 2_500_000),
                                             (" 2_500_000 ", 2_500_000), (75_000, 75_000)])
async def test_tokens_as_the_app_writes_them(fake_stack, written, tokens):
    account = await sign_in(fake_stack, key_name=None)
    assert (await _ask(account, tokens=written))["tokens"] == tokens


@pytest.mark.parametrize("written, message", [
    ("lots", UNREADABLE), ("1.5", UNREADABLE), ("", "Enter the number of tokens, such as 50K or 2.5M."),
    ("0", f"Tokens must be from 1 to {MAX_TOKENS}, not 0."),
])
async def test_tokens_that_cannot_be_read(fake_stack, written, message):
    account = await sign_in(fake_stack, key_name=None)
    response = await account.call("POST", "/account/token-requests", {**FORM, "tokens": written})
    assert_error(response, 400, "invalid_request", param="tokens", message=message)
    assert_error(await account.call("POST", "/account/token-requests", {**FORM, "tokens": True}), 400,
                 "invalid_request", param="tokens")


@pytest.mark.parametrize("field, value, message", [
    ("tokens", None, "Enter the number of tokens, such as 50K or 2.5M."),
    ("models", [], "Choose each model that the work needs."),
    ("models", None, "Choose each model that the work needs."),
    ("project", "  ", "Enter the project."),
    ("planned_usage", None, "Enter the planned usage."),
    ("models", ["gpt-4"], "Choose the models from the list: 'gpt-4' is not one of them."),
    ("models", "llama-8b", "Invalid type for 'models': expected a list of model ids."),
    ("project", 7, "Invalid type for 'project': expected a string."),
    ("results", "x" * 10_001, "Write at most 10,000 characters here; this has 10,001."),
])
async def test_what_to_fix_names_its_question(fake_stack, field, value, message):
    account = await sign_in(fake_stack, key_name=None)
    body = {**FORM, field: value}
    if value is None:
        del body[field]
    assert_error(await account.call("POST", "/account/token-requests", body), 400, "invalid_request", param=field,
                 message=message)
    assert (await account.ok("GET", "/account/token-requests"))["data"] == []


async def test_the_body_is_strict(fake_stack):
    account = await sign_in(fake_stack, key_name=None)
    assert_error(await account.call("POST", "/account/token-requests", {**FORM, "urgent": True}), 400,
                 "invalid_request", param="urgent", message="Unknown parameter: 'urgent'.")
    assert_error(await fake_stack.http.get("/account/token-requests"), 401, "session_ended")


async def test_one_request_waits_at_a_time(fake_stack, capsys):
    account = await sign_in(fake_stack, key_name=None)
    first = await _ask(account)
    assert_error(await account.call("POST", "/account/token-requests", FORM), 409, "token_request_waiting",
                 message=WAITING)
    code, _, _ = _cli(fake_stack, capsys)("token-request", "reject", first["id"], "--note", "Write the paper first.")
    assert code == 0
    second = await _ask(account, tokens="1M")
    assert [(r["id"], r["status"], r["note"]) for r in (await account.ok("GET", "/account/token-requests"))["data"]] \
        == [(second["id"], "waiting", ""), (first["id"], "rejected", "Write the paper first.")]


async def test_an_approval_is_a_grant_to_the_budget(fake_stack, capsys):
    account = await sign_in(fake_stack)
    sent = await _ask(account, tokens="100M")
    cli = _cli(fake_stack, capsys)
    code, out, _ = cli("token-request", "list", "--status", "waiting", "--json")
    listed = [r for r in json.loads(out)["token_requests"] if r["id"] == sent["id"]]
    assert code == 0 and listed[0]["user"]["email"] == account.email
    assert (listed[0]["tokens"], listed[0]["planned_usage"], listed[0]["status"]) == (
        100_000_000, FORM["planned_usage"], "waiting")
    code, out, _ = cli("token-request", "approve", sent["id"], "--tokens", "50K")
    assert (code, out) == (0, f"Approved {sent['id']}: granted 50000 tokens (asked 100000000).\n")
    decided = (await account.ok("GET", "/account/token-requests"))["data"][0]
    assert (decided["status"], decided["tokens"], decided["granted"]) == ("approved", 100_000_000, 50_000)
    assert decided["decided_at"] is not None
    usage = await account.ok("GET", "/account/usage")
    assert usage["budget"] == {"left": 50_000}
    assert [(c["tokens"], c["what"], c["key"], c["note"]) for c in usage["budget_changes"]] == [
        (50_000, "grant", None, "token request")]
    # Decided once: a second decision is refused, and the Budget is unchanged.
    code, _, err = cli("token-request", "approve", sent["id"])
    assert (code, err) == (1, f"error: The token request {sent['id']} is approved already.\n")
    assert (await account.ok("GET", "/account/usage"))["budget"] == {"left": 50_000}
    code, out, _ = cli("token-request", "list")
    assert code == 0 and sent["id"] in out and out.startswith("ID")


async def test_an_approval_without_tokens_grants_what_was_asked(fake_stack, capsys):
    account = await sign_in(fake_stack, key_name=None)
    sent = await _ask(account, tokens="50K")
    assert _cli(fake_stack, capsys)("token-request", "approve", sent["id"])[0] == 0
    assert (await account.ok("GET", "/account/usage"))["budget"] == {"left": 50_000}
    code, _, err = _cli(fake_stack, capsys)("token-request", "reject", "not-an-id")
    assert (code, err) == (1, "error: 'not-an-id' is not a token request id: `token-request list` shows them.\n")


@pytest.mark.postgres
async def test_two_requests_sent_at_once_make_one_on_postgres(fake_stack):
    account = await sign_in(fake_stack, key_name=None)
    answers = await asyncio.gather(*(account.call("POST", "/account/token-requests", FORM) for _ in range(2)))
    assert sorted(answer.status_code for answer in answers) == [201, 409]
    assert len((await account.ok("GET", "/account/token-requests"))["data"]) == 1
