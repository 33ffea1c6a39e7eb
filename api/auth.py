"""The API key check (before the body is read) and the per-key rate limits."""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from api.error_mapping import key_refusal_error
from ledger.errors import KeyRefused
from ledger.keys import Principal, authenticate


def services_of(request: Request) -> Any:
    return request.app.state.services


async def _authenticate(request: Request) -> Principal:
    services = services_of(request)
    try:
        async with services.sessions() as session:
            principal = await authenticate(session, request.headers.get("authorization"))
    except KeyRefused as refusal:
        # 60 a minute from one address with a missing, wrong or revoked key.
        address = request.client.host if request.client else "unknown"
        await services.traffic.check_address(address)
        raise key_refusal_error(refusal) from None
    request.state.principal = principal
    return principal


async def require_principal(request: Request) -> Principal:
    """A /v1 route that starts no work: the key's "other" bucket."""
    principal = await _authenticate(request)
    await services_of(request).traffic.check_key(str(principal.key_id), "other")
    return principal


async def require_work_principal(request: Request) -> Principal:
    """A route that starts work (Completions, Jobs, harvests, Branches): the "work" bucket."""
    principal = await _authenticate(request)
    await services_of(request).traffic.check_key(str(principal.key_id), "work")
    return principal


ApiKeyDep = Annotated[Principal, Depends(require_principal)]
WorkKeyDep = Annotated[Principal, Depends(require_work_principal)]
