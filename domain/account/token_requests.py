"""The App's Request more tokens: the signed-in User asks, and reads Your requests (spec: "Ask for more
tokens"). An admin decides them with the command line (`token-request approve|reject`); the rules are
`domain/operations/token_requests.py`, which both share."""
from __future__ import annotations

import uuid
from typing import Any

from domain.mail import team_mail_of
from domain.operations import token_requests
from domain.operations.documents import iso
from domain.services import Services
from ledger.tokens.tables import TokenRequest

# The questions answered with a text, each optional here: the rules say what a missing one needs.
ANSWERS = ("project", "planned_usage", *token_requests.OPTIONAL)


def request_document(request: TokenRequest) -> dict[str, Any]:
    return {"id": str(request.id), "created_at": iso(request.created_at), "tokens": request.tokens,
            "granted": request.granted, "status": request.status.value, "note": request.note,
            "models": request.models, "project": request.project, "decided_at": iso(request.decided_at)}


async def list_requests(services: Services, user_id: uuid.UUID) -> dict[str, Any]:
    """The User's requests, newest first."""
    async with services.sessions() as session:
        found = await token_requests.requests_of(session, user_id)
    return {"data": [request_document(each) for each in found]}


async def ask(services: Services, user_id: uuid.UUID, tokens: str | int, models: list[str],
              answers: dict[str, str]) -> dict[str, Any]:
    """`tokens` as written (50K), `models` catalog ids, `answers` the texts of ANSWERS."""
    form = token_requests.TokenRequestForm(tokens=tokens, models=models, **answers)
    async with services.ledger.write_sessions() as session:
        made = await token_requests.ask(session, user_id, form, services.clock(),
                                        team=team_mail_of(services.settings))
    return request_document(made)
