"""An admin's token requests (spec: "Decide token requests"): the list with each User, one request with its
answers, approve with the tokens to grant (a Grant to the User's Budget) or reject with a note that the
User reads. The rules are `domain/operations/token_requests.py`, which the command line shares."""
from __future__ import annotations

import uuid
from typing import Any

from domain.completions.validation import bad_value
from domain.operations import token_requests
from domain.services import Services
from ledger.tokens.tables import TokenRequestStatus

STATUSES = tuple(status.value for status in TokenRequestStatus)


def status_of(value: str | None) -> TokenRequestStatus | None:
    """A `?status=` filter: waiting, approved or rejected (None: every request)."""
    if value is None:
        return None
    if value not in STATUSES:
        raise bad_value("status", "waiting, approved or rejected")
    return TokenRequestStatus(value)


def _waiting_first(lines: list[token_requests.RequestLine]) -> list[token_requests.RequestLine]:
    """The waiting ones first, the longest waiting on top (`request_lines` is oldest first); then the
    decided ones, the newest decision first."""
    waiting = [line for line in lines if line.request.status == TokenRequestStatus.waiting]
    decided = [line for line in lines if line.request.status != TokenRequestStatus.waiting]
    decided.sort(key=lambda line: line.request.decided_at or line.request.created_at, reverse=True)
    return waiting + decided


async def list_requests(services: Services, status: TokenRequestStatus | None) -> dict[str, Any]:
    async with services.sessions() as session:
        lines = await token_requests.request_lines(session, status)
    return {"token_requests": [token_requests.line_document(line) for line in _waiting_first(lines)]}


async def show_request(services: Services, request_id: uuid.UUID) -> dict[str, Any]:
    async with services.sessions() as session:
        return token_requests.line_document(await token_requests.request_line(session, request_id))


async def approve(services: Services, request_id: uuid.UUID, tokens: int, by: str) -> dict[str, Any]:
    """Approve with `tokens`, which may differ from the tokens asked: a Grant to the User's Budget."""
    async with services.ledger.write_sessions() as session:
        await token_requests.approve(session, request_id, tokens=tokens, decided_by=by, now=services.clock())
        return token_requests.line_document(await token_requests.request_line(session, request_id))


async def reject(services: Services, request_id: uuid.UUID, note: str, by: str) -> dict[str, Any]:
    """Reject with `note` (may be empty), which the User reads under the request."""
    async with services.ledger.write_sessions() as session:
        await token_requests.reject(session, request_id, note=note, decided_by=by, now=services.clock())
        return token_requests.line_document(await token_requests.request_line(session, request_id))
