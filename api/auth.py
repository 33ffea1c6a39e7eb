"""The API key check, run before the body is read."""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from ledger.keys import Principal, authenticate


async def require_principal(request: Request) -> Principal:
    services = request.app.state.services
    async with services.sessions() as session:
        principal = await authenticate(session, request.headers.get("authorization"))
    request.state.principal = principal
    return principal


ApiKeyDep = Annotated[Principal, Depends(require_principal)]


def services_of(request: Request) -> Any:
    return request.app.state.services
