"""The App's Request more tokens: the signed-in User asks, and reads Your requests (spec: "Ask for more
tokens"). An admin decides them with the command line (`token-request approve|reject`)."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from api.account.session import AccountDep
from api.admin import bodies, context
from api.auth import services_of
from domain.completions.validation import bad_type, text
from domain.error_mapping import account_refusals
from domain import errors
from domain.operations import token_requests
from domain.operations.documents import iso
from ledger.tokens.tables import TokenRequest

router = APIRouter(prefix="/token-requests")
FIELDS = ("tokens", "models", "project", "planned_usage", *token_requests.OPTIONAL)
UNKNOWN_MODEL = "Choose the models from the list: {name!r} is not one of them."


def request_document(request: TokenRequest) -> dict[str, Any]:
    return {"id": str(request.id), "created_at": iso(request.created_at), "tokens": request.tokens,
            "granted": request.granted, "status": request.status.value, "note": request.note,
            "models": request.models, "project": request.project, "decided_at": iso(request.decided_at)}


@router.get("")
async def list_requests(request: Request, account: AccountDep):
    bodies.read_query(request, ())
    async with context.reads(request) as session:
        found = await token_requests.requests_of(session, account.user_id)
    return {"data": [request_document(each) for each in found]}


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


def _form(request: Request, body: dict[str, Any]) -> token_requests.TokenRequestForm:
    answers = {name: bodies.optional_text(body, name) for name in ("project", "planned_usage",
                                                                    *token_requests.OPTIONAL)}
    return token_requests.TokenRequestForm(tokens=_tokens(body), models=_models(request, body), **answers)


@router.post("", status_code=201)
async def ask_for_tokens(request: Request, account: AccountDep):
    form = _form(request, await bodies.read_fields(request, FIELDS))
    async with context.writes(request) as session:
        with account_refusals():
            made = await token_requests.ask(session, account.user_id, form, context.platform(request).clock())
    return request_document(made)
