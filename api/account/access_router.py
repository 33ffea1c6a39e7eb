"""The App's access routes: the CSRF cookie, Apply and Invites, sign-in and sign-out, who is signed in,
and password links. HTTP in and out; the logic is the ledger's (applications, sign_in, access_links)."""
from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, BackgroundTasks, Request, Response

from domain import errors
from api.account import cookies
from domain.mail import mail_base_url
from api.account.session import AccountDep, live_session
from api.admin import bodies
from api.client_address import client_address
from domain.completions.validation import text
from domain.error_mapping import access_refusals
from ledger.accounts import access_links
from ledger.accounts import app_sessions
from ledger.accounts import keys
from ledger.accounts import sign_in
from ledger.accounts.access_tries import Family, count_try
from ledger.accounts.applications import ApplicationForm, accept_invite, submit
from ledger.accounts.mail import deliver_pending

router = APIRouter(prefix="/account")
log = logging.getLogger("acs.account")
FORM_FIELDS = ("name", "organization", "planned_usage", "agree_to_rules", "how_you_heard", "links",
               "expected_tokens")
AGREE = "Agree to the platform rules to apply."
CHECK_EMAIL = "Check your email."


def _services(request: Request) -> Any:
    return request.app.state.services


async def _count(request: Request, family: Family, account: str | None = None) -> None:
    """Count this try from the client's address, and against the account (an email) it names."""
    services = _services(request)
    async with services.ledger.write_sessions() as session:
        with access_refusals():
            await count_try(session, family, client_address(request), services.clock(), account=account)


async def _send_mail(services: Any) -> None:
    """After the answer: the mail that the request's transaction wrote (the Runner retries what fails)."""
    try:
        await deliver_pending(services.ledger.write_sessions, services.mailer, services.clock())
    except Exception:  # noqa: BLE001 - the mail stays in the outbox for the Runner
        log.exception("sending the App's mail failed")


def _form(body: dict[str, Any]) -> ApplicationForm:
    if body.get("agree_to_rules") is not True:
        raise errors.InvalidRequest(AGREE, "agree_to_rules")
    values = {name: text(bodies.required(body, name), name) for name in ("name", "organization", "planned_usage")}
    optional = {name: bodies.optional_text(body, name) for name in ("how_you_heard", "links", "expected_tokens")}
    return ApplicationForm(**values, **optional)


@router.get("/csrf", status_code=204)
async def csrf_cookie(request: Request, response: Response) -> None:
    cookies.set_csrf_cookie(request, response)


@router.post("/applications", status_code=201)
async def apply(request: Request) -> dict:
    body = await bodies.read_fields(request, ("email", *FORM_FIELDS))
    email = text(bodies.required(body, "email"), "email")
    form = _form(body)
    await _count(request, Family.applications, email)
    services = _services(request)
    async with services.ledger.write_sessions() as session:
        with access_refusals():
            await submit(session, email, form, services.clock())
    return {"status": "received"}


@router.get("/invites/{token}")
async def read_invite(token: str, request: Request) -> dict:
    services = _services(request)
    async with services.sessions() as session:
        with access_refusals():
            invite = await access_links.live_invite(session, token, services.clock())
    return {"email": invite.email}


@router.post("/invites/{token}", status_code=201)
async def use_invite(token: str, request: Request) -> dict:
    form = _form(await bodies.read_fields(request, FORM_FIELDS))
    services = _services(request)
    async with services.ledger.write_sessions() as session:
        with access_refusals():
            password_token = await accept_invite(session, token, form, services.clock())
    return {"password_token": password_token}


@router.post("/sign-in")
async def sign_in_route(request: Request, response: Response) -> dict:
    body = await bodies.read_fields(request, ("email", "password"))
    email = text(bodies.required(body, "email"), "email")
    password = text(bodies.required(body, "password"), "password")
    await _count(request, Family.sign_in, email)
    services = _services(request)
    with access_refusals():
        async with services.sessions() as session:
            user = await sign_in.user_of_password(session, email, password)
        async with services.ledger.write_sessions() as session:
            signed = await sign_in.start_session(session, user, services.clock())
    cookies.set_session_cookie(request, response, signed.token, signed.expires_at, services.clock())
    cookies.set_csrf_cookie(request, response)
    me = await _me(services, signed.user.id, signed.user.email or "", signed.user.name, signed.user.role.value)
    return {"user": me, "next": "/usage" if me["has_key"] else "/api-keys"}


@router.post("/sign-out", status_code=204)
async def sign_out(request: Request, response: Response) -> None:
    """Ends the session when there is one; the answer is the same without, so sign-out never fails."""
    if request.headers.get("authorization") is not None:
        raise errors.SessionRequired(errors.SESSION_REQUIRED_MESSAGE)
    try:
        found = await live_session(request)
    except errors.SessionEnded:
        found = None
    if found is not None:
        services = _services(request)
        async with services.ledger.write_sessions() as session:
            await app_sessions.end(session, found.session_id, services.clock())
            await session.commit()
    cookies.clear_session_cookie(request, response)


@router.get("/me")
async def me(request: Request, account: AccountDep) -> dict:
    return await _me(_services(request), account.user_id, account.email, account.name, account.role.value)


async def _me(services: Any, user_id: Any, email: str, name: str, role: str) -> dict:
    async with services.sessions() as session:
        has_key = bool(await keys.list_keys(session, user_id))
    # No sign-in provider is offered yet: `providers` lists the linked ones when there are.
    return {"id": str(user_id), "email": email, "name": name, "role": role, "has_key": has_key, "providers": []}


@router.post("/password-links")
async def ask_password_link(request: Request, background: BackgroundTasks) -> dict:
    body = await bodies.read_fields(request, ("email",))
    email = text(bodies.required(body, "email"), "email")
    await _count(request, Family.links, email)
    services = _services(request)
    async with services.ledger.write_sessions() as session:
        if await sign_in.ask_password_link(session, email, services.clock(), mail_base_url(services.settings)):
            background.add_task(_send_mail, services)
    return {"message": CHECK_EMAIL}


@router.get("/password-links/{token}")
async def read_password_link(token: str, request: Request) -> dict:
    services = _services(request)
    async with services.sessions() as session:
        with access_refusals():
            live = await access_links.live_password_link(session, token, services.clock())
    return {"purpose": live.link.purpose.value, "email": live.user.email}


@router.post("/password")
async def set_password(request: Request) -> dict:
    body = await bodies.read_fields(request, ("token", "password"))
    token = text(bodies.required(body, "token"), "token")
    password = text(bodies.required(body, "password"), "password")
    await _count(request, Family.password)
    services = _services(request)
    async with services.ledger.write_sessions() as session:
        with access_refusals():
            message = await sign_in.set_password(session, token, password, services.clock())
    return {"message": message}
