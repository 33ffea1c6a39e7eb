"""Mail to the team (ACS_TEAM_EMAIL): a new Application and a new token request each queue one mail to the
team in the outbox, in the transaction that makes them, and it goes out after the answer; without the
setting the team gets nothing (spec: "Decide token requests": each new request sends the team an email)."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import func
from sqlmodel import select

from ledger.accounts.tables import Application, ApplicationStatus, MailOutbox
from tests.account_fixtures import browser_client
from tests.unit.test_account_access import Outbox, outbox  # noqa: F401 - outbox: the fixture
from tests.own_account import OwnAccount, sign_in

TEAM = "team@acs.example.org"
BASE = "https://app.example.org"
TEAM_MAIL = {"team_email": TEAM, "public_base_url": BASE}
APPLY = {"name": "Ada Lovelace", "organization": "Analytical Engines", "planned_usage": "Probing base models.",
         "agree_to_rules": True, "expected_tokens": "2M"}
ASK = {"tokens": "2.5M", "models": ["llama-8b"], "project": "Refusal directions",
       "planned_usage": "Activations of 20,000 prompts at 4 Layers.", "when_needed": "By June"}


@pytest.fixture
def composed(outbox: Outbox) -> dict[str, Any]:
    return {"mailer": outbox}


async def _outbox_rows(stack: Any, to: str) -> int:
    async with stack.services.sessions() as session:
        return (await session.exec(select(func.count()).select_from(MailOutbox)
                                   .where(MailOutbox.to_address == to))).one()


async def _all_rows(stack: Any) -> int:
    async with stack.services.sessions() as session:
        return (await session.exec(select(func.count()).select_from(MailOutbox))).one()


async def _apply(stack: Any, email: str, **changes: Any) -> None:
    browser = await browser_client(stack)
    answer = await browser.post("/account/applications", json={**APPLY, "email": email, **changes},
                                headers={"X-CSRF-Token": browser.cookies["acs_csrf"]})
    assert answer.status_code == 201, answer.text


async def _with_application(stack: Any, account: OwnAccount) -> None:
    """The User's approved Application, whose organization the team's mail names."""
    async with stack.services.ledger.write_sessions() as session:
        session.add(Application(email=account.email, name="Ada", organization="Analytical Engines",
                                planned_usage="Probing.", status=ApplicationStatus.approved,
                                user_id=account.user_id))
        await session.commit()


def _email() -> str:
    return f"ada-{uuid.uuid4().hex[:10]}@example.org"


@pytest.mark.settings(**TEAM_MAIL)
async def test_a_new_application_mails_the_team_once(fake_stack, outbox):
    before = await _outbox_rows(fake_stack, TEAM)
    email = _email()
    await _apply(fake_stack, email, links="https://example.org/paper")
    assert await _outbox_rows(fake_stack, TEAM) == before + 1
    [mail] = outbox.to(TEAM)
    assert mail["Subject"] == "New application: Ada Lovelace (Analytical Engines)"
    body = mail.get_content()
    assert f"Name: Ada Lovelace\nEmail: {email}\nOrganization: Analytical Engines\n" in body
    assert "Planned usage:\nProbing base models.\n" in body and "Links:\nhttps://example.org/paper\n" in body
    assert "How they heard:\nNot answered\n" in body and "Expected tokens:\n2M\n" in body
    assert f"Approve or reject it on Admin, Applications:\n{BASE}/admin?tab=applications\n" in body
    assert outbox.to(email) == []  # the applicant hears only when an admin decides


@pytest.mark.settings(**TEAM_MAIL)
async def test_a_name_with_a_line_break_stays_one_line_in_the_subject(fake_stack, outbox):
    await _apply(fake_stack, _email(), name="Ada\nBcc: eve@example.org")
    [mail] = outbox.to(TEAM)
    assert mail["Subject"] == "New application: Ada Bcc: eve@example.org (Analytical Engines)"
    assert mail["Bcc"] is None


@pytest.mark.settings(**TEAM_MAIL)
async def test_each_new_token_request_mails_the_team_once(fake_stack, outbox):
    account = await sign_in(fake_stack, key_name=None)
    await _with_application(fake_stack, account)
    before = await _outbox_rows(fake_stack, TEAM)
    await account.ok("POST", "/account/token-requests", ASK, status=201)
    assert await _outbox_rows(fake_stack, TEAM) == before + 1
    [mail] = outbox.to(TEAM)
    name = (await account.ok("GET", "/account/me"))["name"]
    assert mail["Subject"] == f"New token request: 2,500,000 tokens from {name}"
    body = mail.get_content()
    assert f"Name: {name}\nEmail: {account.email}\nOrganization: Analytical Engines\n" in body
    assert "Tokens: 2,500,000\nModels: tiny-llama\n" in body
    assert "Project:\nRefusal directions\n" in body and "When they need them:\nBy June\n" in body
    assert "Results:\nNot answered\n" in body
    assert f"Approve or reject it on Admin, Token requests:\n{BASE}/admin?tab=token-requests\n" in body
    assert "Bearer" not in body and "token=" not in body  # no credential of any kind

    refused = await account.call("POST", "/account/token-requests", ASK)  # one waits: nothing new to decide
    assert refused.status_code == 409 and await _outbox_rows(fake_stack, TEAM) == before + 1


@pytest.mark.settings(**TEAM_MAIL)
async def test_a_user_without_an_application_has_no_organization_line(fake_stack, outbox):
    account = await sign_in(fake_stack, key_name=None)
    await account.ok("POST", "/account/token-requests", ASK, status=201)
    [mail] = outbox.to(TEAM)
    assert "Organization:" not in mail.get_content()


async def test_without_a_team_email_the_team_gets_no_mail(fake_stack, outbox):
    before = await _all_rows(fake_stack)
    await _apply(fake_stack, _email())
    account = await sign_in(fake_stack, key_name=None)
    await account.ok("POST", "/account/token-requests", ASK, status=201)
    assert await _all_rows(fake_stack) == before and outbox.messages == []


@pytest.mark.postgres
@pytest.mark.settings(**TEAM_MAIL)
async def test_two_requests_sent_at_once_mail_the_team_once_on_postgres(fake_stack, outbox):
    """The User's row lock lets one request through; the other's mail goes with its rollback."""
    account = await sign_in(fake_stack, key_name=None)
    before = await _outbox_rows(fake_stack, TEAM)
    answers = await asyncio.gather(*(account.call("POST", "/account/token-requests", ASK) for _ in range(2)))
    assert sorted(answer.status_code for answer in answers) == [201, 409]
    assert await _outbox_rows(fake_stack, TEAM) == before + 1 and len(outbox.to(TEAM)) == 1
