"""The App's Loom page's routes under /account/looms: the /v1/looms routes for the App's session.

Each is its /v1 route with the session and, for each write, the CSRF token in place of an API key,
over the same domain calls (domain/looms/: service.py, changes.py, files.py, stream.py), so bodies,
checks, messages and answers are the API's, the Idempotency-Key too when the App sends one. What
differs, as the spec says:
- The Principal is the User with no key (as a Playground Run's): the Nodes that the App starts
  run whatever becomes of the User's keys, and their Usage source stays `loom`.
- A Branch counts against the App's 600 a minute of the User, not a key's bucket (spec: Limits).
- An import names the Loom "<the file's title> (imported)" (spec: "Export and import").
- A refusal that the API words with a /v1 route names the Loom page's button instead, such as
  "Stop" for `POST /v1/looms/{loom_id}/cancel` (domain/looms/wording.py).
A session renewal that falls on an answer goes out with it (`with_renewal`): these routes answer
Responses of their own, as /v1's do.
"""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from api.account.session import AccountDep, with_renewal
from api.answers import respond
from api.auth import services_of
from api.body import read_json
from api.errors_http import request_id_of
from api.follow_stream import follow_stream
from api.idempotency_header import idempotency_key
from domain.answers import Answer
from domain.looms import stream
from domain.looms.service import LoomService
from ledger.accounts.keys import Principal

router = APIRouter(prefix="/looms")


def app_principal(account: AccountDep) -> Principal:
    """The signed-in User, acting with no API key."""
    return Principal(user_id=account.user_id, key_id=None, key_name="")


AppDep = Annotated[Principal, Depends(app_principal)]


async def app_work_principal(request: Request, principal: AppDep) -> Principal:
    """As AppDep, for a route that starts work: one more against the User's App limit."""
    await services_of(request).traffic.check_app_user(str(principal.user_id))
    return principal


AppWorkDep = Annotated[Principal, Depends(app_work_principal)]


def _service(request: Request) -> LoomService:
    # The App's: its refusals name the Loom page's buttons, and its import marks the title.
    return LoomService(services_of(request), in_app=True)


async def _body(request: Request) -> Any:
    return await read_json(request, services_of(request).settings.max_body_bytes)


def _answer(answer: Answer, response: Response) -> Response:
    return with_renewal(respond(answer), response)


@router.get("")
async def list_looms(request: Request, principal: AppDep):
    return await _service(request).list(principal)


@router.post("")
async def create_loom(request: Request, response: Response, principal: AppDep):
    key = idempotency_key(request)
    return _answer(await _service(request).create(await _body(request), principal, key), response)


@router.post("/import")
async def import_loom(request: Request, response: Response, principal: AppDep):
    key = idempotency_key(request)
    return _answer(await _service(request).import_(await _body(request), principal, key), response)


@router.get("/{loom_id}/export")
async def export_loom(loom_id: str, request: Request, principal: AppDep):
    return await _service(request).export(loom_id, principal)


@router.get("/{loom_id}")
async def get_loom(loom_id: str, request: Request, principal: AppDep):
    # With the last Branch's settings, with which the page opens the Loom.
    return await _service(request).get(loom_id, principal, with_last_branch=True)


@router.post("/{loom_id}")
async def update_loom(loom_id: str, request: Request, response: Response, principal: AppDep):
    key = idempotency_key(request)
    return _answer(await _service(request).change(loom_id, await _body(request), principal, key), response)


@router.delete("/{loom_id}")
async def delete_loom(loom_id: str, request: Request, response: Response, principal: AppDep):
    return _answer(await _service(request).delete(loom_id, principal, idempotency_key(request)), response)


@router.get("/{loom_id}/stream")
async def stream_loom(loom_id: str, request: Request, response: Response, principal: AppDep):
    services = services_of(request)
    updates = await stream.follow(services, loom_id, principal)
    return with_renewal(follow_stream(updates, services.settings.keepalive_s, request_id_of(request)), response)


@router.post("/{loom_id}/cancel")
async def cancel_loom(loom_id: str, request: Request, response: Response, principal: AppDep):
    return _answer(await _service(request).cancel(loom_id, principal, idempotency_key(request)), response)


@router.post("/{loom_id}/nodes/{node_id}/branch")
async def create_branch(loom_id: str, node_id: str, request: Request, response: Response, principal: AppWorkDep):
    key = idempotency_key(request)
    return _answer(await _service(request).branch(loom_id, node_id, await _body(request), principal, key), response)


# -- the tree's edits ------------------------------------------------------------------------------

@router.post("/{loom_id}/root")
async def set_root(loom_id: str, request: Request, response: Response, principal: AppDep):
    key = idempotency_key(request)
    return _answer(await _service(request).new_root(loom_id, await _body(request), principal, key), response)


@router.post("/{loom_id}/nodes/{node_id}")
async def edit_node(loom_id: str, node_id: str, request: Request, response: Response, principal: AppDep):
    key = idempotency_key(request)
    return _answer(await _service(request).edit(loom_id, node_id, await _body(request), principal, key), response)


@router.delete("/{loom_id}/nodes/{node_id}")
async def delete_node(loom_id: str, node_id: str, request: Request, response: Response, principal: AppDep):
    answer = await _service(request).delete_node(loom_id, node_id, principal, idempotency_key(request))
    return _answer(answer, response)


@router.post("/{loom_id}/nodes/{node_id}/split")
async def split_node(loom_id: str, node_id: str, request: Request, response: Response, principal: AppDep):
    key = idempotency_key(request)
    return _answer(await _service(request).split(loom_id, node_id, await _body(request), principal, key), response)


@router.post("/{loom_id}/nodes/{node_id}/sibling")
async def add_sibling(loom_id: str, node_id: str, request: Request, response: Response, principal: AppDep):
    key = idempotency_key(request)
    return _answer(await _service(request).sibling(loom_id, node_id, await _body(request), principal, key),
                   response)
