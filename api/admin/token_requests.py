"""Admin routes of token requests (spec: "Decide token requests"): list, read, approve with the tokens to
grant, reject with a note to the User. HTTP in and out; the logic is `domain/admin/token_requests.py`."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.admin import bodies
from api.auth import AdminDep, services_of
from domain.admin import token_requests

router = APIRouter(prefix="/v1/admin/token-requests")
REQUEST = "a token request id"


@router.get("")
async def list_requests(request: Request, admin: AdminDep):
    """Every request with its User and answers, the waiting ones first; `?status=` waiting, approved or
    rejected."""
    query = bodies.read_query(request, ("status",))
    return await token_requests.list_requests(services_of(request), token_requests.status_of(query.get("status")))


@router.get("/{request_id}")
async def show_request(request_id: str, request: Request, admin: AdminDep):
    found = bodies.path_id(request_id, "request_id", REQUEST)
    return await token_requests.show_request(services_of(request), found)


@router.post("/{request_id}/approve")
async def approve_request(request_id: str, request: Request, admin: AdminDep):
    """`tokens`: the tokens to grant (50K, 2.5M, 2500000 or a number), which may differ from those asked."""
    found = bodies.path_id(request_id, "request_id", REQUEST)
    tokens = bodies.tokens(await bodies.read_fields(request, ("tokens",)), "tokens", least=1)
    return await token_requests.approve(services_of(request), found, tokens, admin.name)


@router.post("/{request_id}/reject")
async def reject_request(request_id: str, request: Request, admin: AdminDep):
    """`note` (optional): what the User reads under the request."""
    found = bodies.path_id(request_id, "request_id", REQUEST)
    note = bodies.optional_text(await bodies.read_fields(request, ("note",)), "note")
    return await token_requests.reject(services_of(request), found, note, admin.name)
