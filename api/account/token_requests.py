"""The App's Request more tokens: the signed-in User asks, and reads Your requests (spec: "Ask for more
tokens"). HTTP in and out; the logic is `domain/account/token_requests.py`."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Request

from api.account.session import AccountDep
from api.admin import bodies
from api.auth import services_of
from domain import errors
from domain.account import access, token_requests
from domain.completions.validation import bad_type, text
from domain.mail import team_mail_of

router = APIRouter(prefix="/token-requests")
FIELDS = ("tokens", "models", *token_requests.ANSWERS)
UNKNOWN_MODEL = "Choose the models from the list: {name!r} is not one of them."


@router.get("")
async def list_requests(request: Request, account: AccountDep):
    bodies.read_query(request, ())
    return await token_requests.list_requests(services_of(request), account.user_id)


def _tokens(body: dict[str, Any]) -> str | int:
    value = body.get("tokens")
    if value is None:
        return ""  # the ledger says what to fix, as for the other required questions
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise bad_type("tokens", "a number of tokens, or a text such as 50K or 2.5M")
    return value


def _models(request: Request, body: dict[str, Any]) -> list[str]:
    """Model ids; an alias or a served name counts as its model."""
    value = body.get("models")
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_type("models", "a list of model ids")
    catalog = services_of(request).catalog
    found = []
    for name in (text(each, "models") for each in value):
        model = catalog.resolve(name)
        if model is None:
            raise errors.InvalidRequest(UNKNOWN_MODEL.format(name=name), "models")
        found.append(model.id)
    return found


@router.post("", status_code=201)
async def ask_for_tokens(request: Request, account: AccountDep, background: BackgroundTasks):
    body = await bodies.read_fields(request, FIELDS)
    answers = {name: bodies.optional_text(body, name) for name in token_requests.ANSWERS}
    tokens, models = _tokens(body), _models(request, body)
    services = services_of(request)
    made = await token_requests.ask(services, account.user_id, tokens, models, answers)
    if team_mail_of(services.settings) is not None:
        background.add_task(access.send_mail, services)  # the team's mail, after the answer
    return made
