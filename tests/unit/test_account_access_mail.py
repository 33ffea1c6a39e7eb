"""The App's mail and the admin's access commands: a real SMTP server on loopback (aiosmtpd), the
outbox folder, mail that the server refused going out later, and `application`/`invite`/`user
password-link` of the command line on SQLite and PostgreSQL."""
from __future__ import annotations

import email
import email.policy
import json
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiosmtpd.controller import Controller
from pydantic import SecretStr
from sqlmodel import select

from domain.mail import mail_base_url, mailer_of
from domain.settings import Settings
from cluster.embedded import own_url
from deployments.background.runner import Runner
from cluster.admin_cli import commands as admin
from ledger.accounts import applications
from ledger.accounts import passwords
from ledger.accounts.access_links import make_invite
from ledger.accounts.tables import Application, ApplicationStatus, MailOutbox, PasswordLink
from ledger.store.coltypes import utcnow
from ledger.accounts.applications import ApplicationForm
from ledger.store.db import make_engine, session_factory
from ledger.tokens.grants import standing
from ledger.accounts.mail import MAX_TRIES, RETRY_WINDOW, OutboxFolderMailer, SmtpMailer, deliver_pending, queue_mail
from ledger.accounts.tables import Standing, User, UserTag
from tests.account_fixtures import browser_client
from tests.ledger_fixtures import command_line, db_url, pg_url, run_async  # noqa: F401

NOW = datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc)
BASE = "https://app.example.org"
LINK = re.compile(r"(https?://\S+[?&](?:token|invite)=([\w-]+))")


class Inbox:
    """What the loopback SMTP server received, as parsed messages."""

    def __init__(self) -> None:
        self.messages: list[email.message.EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.arrived = threading.Condition()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.arrived:
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
            self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
            self.arrived.notify_all()
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[email.message.EmailMessage]:
        return [message for message in self.messages if message["To"] == address]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, str]]:
    """A real SMTP server on a free loopback port; yields its inbox and its smtp:// URL."""
    inbox, port = Inbox(), free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield inbox, f"smtp://127.0.0.1:{port}"
    finally:
        controller.stop()


def link_in(message: email.message.EmailMessage) -> tuple[str, str]:
    found = LINK.search(message.get_content())
    assert found, message.get_content()
    return found.group(1), found.group(2)


def unique_email(tag: str = "grace") -> str:
    return f"{tag}-{uuid.uuid4().hex[:10]}@example.org"


# -- the Mailers --------------------------------------------------------------------------------------------

def test_the_settings_pick_smtp_or_the_outbox_folder(tmp_path: Path) -> None:
    assert isinstance(mailer_of(Settings(smtp_url=None, mail_outbox=tmp_path)), OutboxFolderMailer)
    chosen = mailer_of(Settings(smtp_url="smtps://user:pa%40ss@mail.example.org", mail_from="Infra <i@x.org>"))
    assert chosen == SmtpMailer("smtps://user:pa%40ss@mail.example.org", "Infra <i@x.org>")
    assert "pa%40ss" not in repr(Settings(smtp_url="smtp://u:pa%40ss@h:25"))  # a SecretStr


@pytest_asyncio.fixture
async def ledger_sessions(db_url: str) -> Any:  # noqa: F811
    engine = make_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


async def test_outbox_rows_go_out_over_smtp_once(ledger_sessions, smtp) -> None:
    inbox, url = smtp
    async with ledger_sessions() as session:
        queue_mail(session, "ada@example.org", "Set your password", "Choose your password:\nhttp://x/y", NOW)
        await session.commit()
    mailer = SmtpMailer(url, "ACS Infra <infra@acs.test>")
    assert await deliver_pending(ledger_sessions, mailer, NOW) == 1
    assert await deliver_pending(ledger_sessions, mailer, NOW) == 0  # sent once
    [message] = inbox.to("ada@example.org")
    assert message["Subject"] == "Set your password" and message["From"] == "ACS Infra <infra@acs.test>"
    assert inbox.envelopes == [("infra@acs.test", ["ada@example.org"])]
    async with ledger_sessions() as session:
        row = (await session.exec(select(MailOutbox))).one()
    assert row.sent_at is not None and row.tries == 1 and row.last_error is None


async def test_mail_that_the_server_refused_goes_out_later(ledger_sessions, smtp) -> None:
    inbox, url = smtp
    async with ledger_sessions() as session:
        queue_mail(session, "late@example.org", "Reset your password", "Choose a new password:\nhttp://x", NOW)
        await session.commit()
    down = SmtpMailer(f"smtp://127.0.0.1:{free_port()}")  # nobody listens there
    assert await deliver_pending(ledger_sessions, down, NOW) == 0
    async with ledger_sessions() as session:
        row = (await session.exec(select(MailOutbox))).one()
    assert row.sent_at is None and row.tries == 1 and "ConnectionRefusedError" in row.last_error
    assert await deliver_pending(ledger_sessions, SmtpMailer(url), NOW) == 1
    assert [message["To"] for message in inbox.messages] == ["late@example.org"]


async def test_a_claimed_mail_is_not_sent_twice(ledger_sessions, smtp) -> None:
    inbox, url = smtp
    async with ledger_sessions() as session:
        row = queue_mail(session, "once@example.org", "Set your password", "x", NOW)
        row.claimed_until = NOW + timedelta(minutes=2)  # another sender holds it
        await session.commit()
    assert await deliver_pending(ledger_sessions, SmtpMailer(url), NOW) == 0
    assert await deliver_pending(ledger_sessions, SmtpMailer(url), NOW + timedelta(minutes=3)) == 1  # it died
    assert len(inbox.messages) == 1


async def test_the_outbox_folder_writes_eml_files(ledger_sessions, tmp_path: Path) -> None:
    async with ledger_sessions() as session:
        queue_mail(session, "file@example.org", "Reset your password", "Choose a new password:\nhttp://x", NOW)
        await session.commit()
    assert await deliver_pending(ledger_sessions, OutboxFolderMailer(tmp_path / "outbox"), NOW) == 1
    [written] = list((tmp_path / "outbox").glob("*.eml"))
    message = email.message_from_bytes(written.read_bytes(), policy=email.policy.default)
    assert message["To"] == "file@example.org" and message["Subject"] == "Reset your password"
    assert "Choose a new password:" in message.get_content()


async def test_the_runners_housekeeping_sends_what_is_left(ledger_sessions, tmp_path: Path) -> None:
    async with ledger_sessions() as session:  # now, by the Runner's own clock: older mail is past its window
        queue_mail(session, "runner@example.org", "Set your password", "x", utcnow())
        await session.commit()

    class Ledger:
        write_sessions = sessions = ledger_sessions
        owner = "test"

    runner = Runner(Ledger(), [], [], mailer=OutboxFolderMailer(tmp_path))
    await runner._housekeeping()
    assert len(list(tmp_path.glob("*.eml"))) == 1


# -- the routes' mail over real SMTP ---------------------------------------------------------------------

@pytest.mark.settings(public_base_url=BASE)
async def test_a_reset_link_arrives_over_smtp_and_sets_the_password(fake_stack, smtp) -> None:
    inbox, url = smtp
    fake_stack.replace_services(mailer=SmtpMailer(url))
    address = unique_email()
    async with fake_stack.services.ledger.write_sessions() as session:
        session.add(User(name=address, email=address, password_hash=passwords.hash_password("old password 1")))
        await session.commit()
    browser = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": browser.cookies["acs_csrf"]}
    answer = await browser.post("/account/password-links", json={"email": address}, headers=headers)
    assert answer.json() == {"message": "Check your email."}
    [message] = inbox.to(address)
    assert message["Subject"] == "Reset your password"
    link, token = link_in(message)
    assert link.startswith(f"{BASE}/reset-password?token=")
    changed = await browser.post("/account/password", json={"token": token, "password": "new password 2"},
                                 headers=headers)
    assert changed.json() == {"message": "Your password is changed."}
    signed = await browser.post("/account/sign-in", json={"email": address, "password": "new password 2"},
                                headers=headers)
    assert signed.status_code == 200


@pytest.mark.postgres
async def test_sign_in_and_a_set_link_on_postgresql(fake_stack, tmp_path: Path) -> None:
    fake_stack.replace_services(mailer=OutboxFolderMailer(tmp_path))
    address = unique_email("pg")
    async with fake_stack.services.ledger.write_sessions() as session:
        session.add(User(name=address, email=address))
        await session.commit()
    browser = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": browser.cookies["acs_csrf"]}
    assert (await browser.post("/account/password-links", json={"email": address}, headers=headers)).status_code == 200
    [written] = list(tmp_path.glob("*.eml"))
    message = email.message_from_bytes(written.read_bytes(), policy=email.policy.default)
    assert message["Subject"] == "Set your password"
    _, token = link_in(message)
    answer = await browser.post("/account/password", json={"token": token, "password": "a pg password"},
                                headers=headers)
    assert answer.json() == {"message": "Your password is set."}
    signed = await browser.post("/account/sign-in", json={"email": address, "password": "a pg password"},
                                headers=headers)
    assert signed.status_code == 200 and (await browser.get("/account/me")).json()["email"] == address


# -- where the links point, and what the ledger keeps of them (issue 33) -----------------------------------

@pytest.mark.parametrize("public_base_url, base", [(None, "http://127.0.0.1:8000"), (f"{BASE}/", BASE)])
async def test_the_host_header_never_chooses_where_a_reset_link_points(fake_stack, smtp, public_base_url,
                                                                        base) -> None:
    """Someone asks for a reset link to another User's address with their own Host: the mail still links
    to ACS_PUBLIC_BASE_URL (unset in development: the embedded default's address)."""
    inbox, url = smtp
    fake_stack.replace_services(mailer=SmtpMailer(url), settings=fake_stack.services.settings.model_copy(
        update={"public_base_url": public_base_url}))
    victim = unique_email("victim")
    async with fake_stack.services.ledger.write_sessions() as session:
        session.add(User(name=victim, email=victim, password_hash=passwords.hash_password("old password 1")))
        await session.commit()
    attacker = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": attacker.cookies["acs_csrf"], "Host": "attacker.example",
               "X-Forwarded-Host": "attacker.example"}
    answer = await attacker.post("/account/password-links", json={"email": victim}, headers=headers)
    assert answer.json() == {"message": "Check your email."}
    [message] = inbox.to(victim)
    link, _ = link_in(message)
    assert link.startswith(f"{base}/reset-password?token=") and "attacker.example" not in message.get_content()


PRODUCTION = dict(environment="production", harvest_link_secret=SecretStr("s" * 64), metrics_token=SecretStr("m" * 64),
                  database_url="postgresql+asyncpg://acs@db.internal:5432/acs", redis_url="redis://redis.internal:6379/0")


@pytest.mark.parametrize("public_base_url", [None, "", "  "])
def test_outside_development_the_settings_refuse_to_start_without_a_public_url(public_base_url) -> None:
    """Ray turns an unset ${ACS_PUBLIC_BASE_URL} of the serve config into "": refused as well."""
    with pytest.raises(ValueError, match=r"ACS_PUBLIC_BASE_URL is empty, and ACS_ENVIRONMENT is 'production': "
                                         r"the App's mails would have no address of the App to link to"):
        Settings(**PRODUCTION, public_base_url=public_base_url)
    assert mail_base_url(Settings(**PRODUCTION, public_base_url=f"{BASE}/")) == BASE
    # Development may leave it unset: the mails link to the embedded default's own address.
    assert mail_base_url(Settings(public_base_url=public_base_url, port=8123)) == "http://127.0.0.1:8123"


def test_a_public_url_without_its_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match=r"ACS_PUBLIC_BASE_URL is 'app.example.org': write the platform's public "
                                         r"URL with its scheme, such as https://infra.example.org."):
        Settings(public_base_url="app.example.org")


@pytest.mark.parametrize("host, port, url", [("127.0.0.1", 8000, "http://127.0.0.1:8000"),
                                             ("0.0.0.0", 9000, "http://127.0.0.1:9000"),
                                             ("::1", 8000, "http://[::1]:8000"), ("10.1.2.3", 80, "http://10.1.2.3:80")])
def test_the_embedded_default_links_to_the_address_it_listens_on(host, port, url) -> None:
    assert own_url(host, port) == url


async def every_value(sessions: Any) -> str:
    """Each value of each row of each of the ledger's tables, as one text: what a reader of the database sees."""
    from sqlmodel import SQLModel

    import ledger.tables  # noqa: F401 - every table in the metadata

    async with sessions() as session:
        found = [str(tuple(row)) for table in SQLModel.metadata.sorted_tables
                 for row in (await session.execute(table.select())).all()]
    return "\n".join(found)


async def test_the_ledger_keeps_no_live_token_once_its_mail_is_sent(fake_stack, smtp) -> None:
    inbox, url = smtp
    fake_stack.replace_services(mailer=SmtpMailer(url))
    address = unique_email("reader")
    async with fake_stack.services.ledger.write_sessions() as session:
        session.add(User(name=address, email=address, password_hash=passwords.hash_password("old password 1")))
        await session.commit()
    browser = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": browser.cookies["acs_csrf"]}
    assert (await browser.post("/account/password-links", json={"email": address}, headers=headers)).status_code == 200
    [message] = inbox.to(address)
    _, token = link_in(message)
    assert token not in await every_value(fake_stack.services.sessions)  # nobody who reads the ledger can use it
    async with fake_stack.services.sessions() as session:
        [row] = list(await session.exec(select(MailOutbox).where(MailOutbox.to_address == address)))
    assert (row.subject, row.body, row.sent_at is not None) == ("Reset your password", "", True)
    changed = await browser.post("/account/password", json={"token": token, "password": "new password 2"},
                                 headers=headers)
    assert changed.json() == {"message": "Your password is changed."}  # the mail's link works


async def test_given_up_mail_drops_its_body_and_old_rows_go(ledger_sessions, smtp) -> None:
    inbox, url = smtp
    assert RETRY_WINDOW == timedelta(days=7)  # the approval link's life: no later try could help
    async with ledger_sessions() as session:
        queue_mail(session, "sent@example.org", "Set your password", "token=first-secret", NOW)
        queue_mail(session, "lost@example.org", "Set your password", "token=second-secret", NOW).tries = MAX_TRIES - 1
        await session.commit()
    assert await deliver_pending(ledger_sessions, SmtpMailer(f"smtp://127.0.0.1:{free_port()}"), NOW) == 0
    assert await deliver_pending(ledger_sessions, SmtpMailer(url), NOW + timedelta(minutes=3)) == 1
    async with ledger_sessions() as session:
        rows = {row.to_address: row for row in await session.exec(select(MailOutbox))}
    assert rows["sent@example.org"].body == "" and rows["sent@example.org"].sent_at == NOW + timedelta(minutes=3)
    lost = rows["lost@example.org"]  # its last try failed: kept for an operator, without the token
    assert (lost.body, lost.tries, lost.sent_at) == ("", MAX_TRIES, None) and "ConnectionRefusedError" in lost.last_error
    async with ledger_sessions() as session:
        queue_mail(session, "late@example.org", "Set your password", "token=third-secret", NOW)
        await session.commit()
    # Past the retry window every row goes, and an unsent mail is not sent any more: its link has expired.
    assert await deliver_pending(ledger_sessions, SmtpMailer(url), NOW + RETRY_WINDOW - timedelta(seconds=1)) == 1
    assert len(await rows_of(ledger_sessions)) == 3
    assert await deliver_pending(ledger_sessions, SmtpMailer(url), NOW + RETRY_WINDOW) == 0
    assert await rows_of(ledger_sessions) == []
    assert [message["To"] for message in inbox.messages] == ["sent@example.org", "late@example.org"]


async def rows_of(sessions: Any) -> list[MailOutbox]:
    async with sessions() as session:
        return list(await session.exec(select(MailOutbox)))


# -- the command line ------------------------------------------------------------------------------------

@pytest.fixture
def cli(db_url: str, smtp: tuple[Inbox, str], capsys: pytest.CaptureFixture[str]) -> Any:  # noqa: F811
    inbox, url = smtp
    config = admin.AdminConfig(database_url=db_url, clock=lambda: NOW, mailer=SmtpMailer(url), public_base_url=BASE,
                               operator="ops (command line)")
    run = command_line(config, capsys)
    run.inbox = inbox  # type: ignore[attr-defined]
    return run


async def submitted(db_url: str, address: str, name: str = "Grace Hopper") -> None:  # noqa: F811
    engine = make_engine(db_url)
    try:
        async with session_factory(engine)() as session:
            await applications.submit(session, address, ApplicationForm(name, "Navy", "Compilers."), NOW)
    finally:
        await engine.dispose()


async def rows(db_url: str, query: Any) -> list[Any]:  # noqa: F811
    engine = make_engine(db_url)
    try:
        async with session_factory(engine)() as session:
            return list(await session.exec(query))
    finally:
        await engine.dispose()


async def test_approve_makes_the_user_and_mails_its_password_link(cli, db_url) -> None:  # noqa: F811
    address = unique_email()
    await submitted(db_url, address)
    code, out, err = cli("application", "list", "--status", "waiting")
    assert code == 0 and address in out and "Grace Hopper" in out and "Compilers." in out
    code, out, err = cli("application", "approve", address.upper(), "--grant", "2.5M")
    assert code == 0, err
    assert out.startswith(f"Approved {address}: User ")
    [message] = cli.inbox.to(address)
    assert message["Subject"] == "Your ACS Infra application is approved"
    body = message.get_content().replace("\r\n", "\n")  # SMTP carries CRLF lines
    assert "Choose your password:\nhttps://app.example.org/set-password?token=" in body
    [user] = await rows(db_url, select(User).where(User.email == address))
    assert user.name == "Grace Hopper" and user.password_hash is None and user.standing == Standing.active
    [link] = await rows(db_url, select(PasswordLink).where(PasswordLink.user_id == user.id))
    assert link.purpose.value == "approval" and link.expires_at == NOW + timedelta(days=7)
    [application] = await rows(db_url, select(Application).where(Application.email == address))
    assert application.status == ApplicationStatus.approved and application.decided_by == "ops (command line)"
    engine = make_engine(db_url)
    async with session_factory(engine)() as session:
        assert (await standing(session, user.id)).budget == 2_500_000
    await engine.dispose()
    code, out, err = cli("application", "approve", address)
    assert code == 1 and "is approved already" in err


async def test_reject_mails_the_apply_link(cli, db_url) -> None:  # noqa: F811
    address = unique_email("reject")
    await submitted(db_url, address, "Alan")
    code, out, err = cli("application", "reject", address, "--note", "Tell us more about the project.")
    assert code == 0, err
    [message] = cli.inbox.to(address)
    body = message.get_content()
    assert "https://app.example.org/apply" in body and "Tell us more about the project." in body
    code, out, _ = cli("application", "list", "--json")
    assert code == 0 and '"status": "rejected"' in out


async def test_invite_create_prints_a_link(cli) -> None:
    address = unique_email("invited")
    code, out, err = cli("invite", "create", address, "--tokens", "50K", "--tag", "Hiring 2026", "--json")
    assert code == 0, err
    assert cli.inbox.messages == []  # the operator hands the link on
    made = json.loads(out)
    assert made["email"] == address and made["tokens"] == 50_000 and made["tag"] == "hiring-2026"
    assert made["link"].startswith("https://app.example.org/apply?invite=")
    assert made["expires_at"].startswith("2026-05-11T09:00")
    code, _, err = cli("invite", "create", "not-an-email")
    assert code == 1 and "Enter an email address" in err


async def test_user_password_link_sends_set_or_reset(cli, db_url) -> None:  # noqa: F811
    address = unique_email("link")
    await submitted(db_url, address)
    assert cli("application", "approve", address)[0] == 0
    code, out, err = cli("user", "password-link", address)
    assert code == 0 and "'Set your password'" in out, err
    subjects = [message["Subject"] for message in cli.inbox.to(address)]
    assert subjects == ["Your ACS Infra application is approved", "Set your password"]
    live = await rows(db_url, select(PasswordLink).where(PasswordLink.ended_at.is_(None)))  # type: ignore[union-attr]
    assert [link.purpose.value for link in live if link.expires_at == NOW + timedelta(hours=1)] == ["set"]
    code, _, err = cli("user", "password-link", unique_email("nobody"))
    assert code == 1 and "No User has the email" in err


def test_the_invites_tag_and_budget_reach_the_user(db_url) -> None:  # noqa: F811
    """What the Invite carried: checked through the ledger's own accept_invite."""
    async def scenario() -> tuple[list[str], int]:
        engine = make_engine(db_url)
        try:
            async with session_factory(engine)() as session:
                _, token = await make_invite(session, "tag@example.org", NOW, tokens=1000, tag="hiring")
                await session.commit()
                await applications.accept_invite(session, token, ApplicationForm("T", "O", "P"), NOW)
                user = await applications.user_by_email(session, "tag@example.org")
                user_id = user.id
                tags = list(await session.exec(select(UserTag.tag).where(UserTag.user_id == user_id)))
                return tags, (await standing(session, user_id)).budget
        finally:
            await engine.dispose()

    assert run_async(scenario) == (["hiring"], 1000)
