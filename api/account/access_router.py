"""The App's access routes: the CSRF cookie, Apply and Invites, sign-in and sign-out, who is signed in,
and password links. HTTP in and out; the logic is `domain/account/` (access, sign_in, sessions)."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Request, Response

from domain import errors
from api.account import cookies
from api.account.session import AccountDep
from api.admin import bodies
from api.auth import services_of
from api.client_address import client_address
from domain.account import access, sessions, sign_in
from domain.completions.validation import text
from domain.mail import team_mail_of

router = APIRouter(prefix="/account")
FORM_FIELDS = ("name", "organization", "planned_usage", "agree_to_rules", "how_you_heard", "links",
               "expected_tokens")
AGREE = "Agree to the platform rules to apply."
CHECK_EMAIL = "Check your email."


def _answers(body: dict[str, Any]) -> dict[str, str]:
    """The Apply form's texts (an Invite's form too)."""
    if body.get("agree_to_rules") is not True:
        raise errors.InvalidRequest(AGREE, "agree_to_rules")
    values = {name: text(bodies.required(body, name), name) for name in ("name", "organization", "planned_usage")}
    optional = {name: bodies.optional_text(body, name) for name in ("how_you_heard", "links", "expected_tokens")}
    return {**values, **optional}


@router.get("/csrf", status_code=204)
async def csrf_cookie(request: Request, response: Response) -> None:
    cookies.set_csrf_cookie(request, response)


@router.post("/applications", status_code=201)
async def apply(request: Request, background: BackgroundTasks) -> dict:
    body = await bodies.read_fields(request, ("email", *FORM_FIELDS))
    email = text(bodies.required(body, "email"), "email")
    answers = _answers(body)
    services = services_of(request)
    answer = await access.apply(services, email, answers, client_address(request))
    if team_mail_of(services.settings) is not None:
        background.add_task(access.send_mail, services)  # the team's mail, after the answer
    return answer


@router.get("/invites/{token}")
async def read_invite(token: str, request: Request) -> dict:
    return await access.read_invite(services_of(request), token)


@router.post("/invites/{token}", status_code=201)
async def use_invite(token: str, request: Request) -> dict:
    answers = _answers(await bodies.read_fields(request, FORM_FIELDS))
    return await access.use_invite(services_of(request), token, answers)


@router.post("/sign-in")
async def sign_in_route(request: Request, response: Response) -> dict:
    body = await bodies.read_fields(request, ("email", "password"))
    email = text(bodies.required(body, "email"), "email")
    password = text(bodies.required(body, "password"), "password")
    signed = await sign_in.sign_in_with_password(services_of(request), email, password, client_address(request))
    cookies.set_session_cookie(request, response, signed.token, signed.expires_at, signed.now)
    cookies.set_csrf_cookie(request, response)
    return signed.document


@router.post("/sign-out", status_code=204)
async def sign_out(request: Request, response: Response) -> None:
    """Ends the session when there is one; the answer is the same without, so sign-out never fails."""
    if request.headers.get("authorization") is not None:
        raise errors.SessionRequired(errors.SESSION_REQUIRED_MESSAGE)
    await sessions.end(services_of(request), request.cookies.get(cookies.SESSION_COOKIE))
    cookies.clear_session_cookie(request, response)


@router.get("/me")
async def me(request: Request, account: AccountDep) -> dict:
    return await sign_in.me(services_of(request), account.user_id, account.email, account.name, account.role.value)


@router.post("/password-links")
async def ask_password_link(request: Request, background: BackgroundTasks) -> dict:
    body = await bodies.read_fields(request, ("email",))
    email = text(bodies.required(body, "email"), "email")
    services = services_of(request)
    if await access.ask_password_link(services, email, client_address(request)):
        background.add_task(access.send_mail, services)
    return {"message": CHECK_EMAIL}


@router.get("/password-links/{token}")
async def read_password_link(token: str, request: Request) -> dict:
    return await access.read_password_link(services_of(request), token)


@router.post("/password")
async def set_password(request: Request) -> dict:
    body = await bodies.read_fields(request, ("token", "password"))
    token = text(bodies.required(body, "token"), "token")
    password = text(bodies.required(body, "password"), "password")
    return await access.set_password(services_of(request), token, password, client_address(request))
