"""The Loom routes: HTTP in and out. The logic: domain/looms/service.py (the Loom, Branch, stop, and
around each change its Idempotency-Key), domain/looms/changes.py (the tree's edits), domain/looms/files.py
(export, import), domain/looms/stream.py (what a stream shows; api/follow_stream.py sends it)."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from api.answers import respond
from api.auth import ApiKeyDep, WorkKeyDep, services_of
from api.body import read_json
from api.errors_http import request_id_of
from api.follow_stream import follow_stream
from api.idempotency_header import idempotency_key
from domain.looms import stream
from domain.looms.service import LoomService

router = APIRouter()


def _service(request: Request) -> LoomService:
    return LoomService(services_of(request))


async def _body(request: Request) -> Any:
    return await read_json(request, services_of(request).settings.max_body_bytes)


@router.get("/v1/looms")
async def list_looms(request: Request, principal: ApiKeyDep):
    return await _service(request).list(principal)


@router.post("/v1/looms")
async def create_loom(request: Request, principal: ApiKeyDep):
    key = idempotency_key(request)
    return respond(await _service(request).create(await _body(request), principal, key))


@router.post("/v1/looms/import")
async def import_loom(request: Request, principal: ApiKeyDep):
    key = idempotency_key(request)
    return respond(await _service(request).import_(await _body(request), principal, key))


@router.get("/v1/looms/{loom_id}/export")
async def export_loom(loom_id: str, request: Request, principal: ApiKeyDep):
    return await _service(request).export(loom_id, principal)


@router.get("/v1/looms/{loom_id}")
async def get_loom(loom_id: str, request: Request, principal: ApiKeyDep):
    return await _service(request).get(loom_id, principal)


@router.post("/v1/looms/{loom_id}")
async def update_loom(loom_id: str, request: Request, principal: ApiKeyDep):
    key = idempotency_key(request)
    return respond(await _service(request).change(loom_id, await _body(request), principal, key))


@router.delete("/v1/looms/{loom_id}")
async def delete_loom(loom_id: str, request: Request, principal: ApiKeyDep):
    return respond(await _service(request).delete(loom_id, principal, idempotency_key(request)))


@router.get("/v1/looms/{loom_id}/stream")
async def stream_loom(loom_id: str, request: Request, principal: ApiKeyDep):
    services = services_of(request)
    updates = await stream.follow(services, loom_id, principal)
    return follow_stream(updates, services.settings.keepalive_s, request_id_of(request))


@router.post("/v1/looms/{loom_id}/cancel")
async def cancel_loom(loom_id: str, request: Request, principal: ApiKeyDep):
    return respond(await _service(request).cancel(loom_id, principal, idempotency_key(request)))


@router.post("/v1/looms/{loom_id}/nodes/{node_id}/branch")
async def create_branch(loom_id: str, node_id: str, request: Request, principal: WorkKeyDep):
    key = idempotency_key(request)
    return respond(await _service(request).branch(loom_id, node_id, await _body(request), principal, key))


# -- the tree's edits ------------------------------------------------------------------------------

@router.post("/v1/looms/{loom_id}/root")
async def set_root(loom_id: str, request: Request, principal: ApiKeyDep):
    key = idempotency_key(request)
    return respond(await _service(request).new_root(loom_id, await _body(request), principal, key))


@router.post("/v1/looms/{loom_id}/nodes/{node_id}")
async def edit_node(loom_id: str, node_id: str, request: Request, principal: ApiKeyDep):
    key = idempotency_key(request)
    return respond(await _service(request).edit(loom_id, node_id, await _body(request), principal, key))


@router.delete("/v1/looms/{loom_id}/nodes/{node_id}")
async def delete_node(loom_id: str, node_id: str, request: Request, principal: ApiKeyDep):
    return respond(await _service(request).delete_node(loom_id, node_id, principal, idempotency_key(request)))


@router.post("/v1/looms/{loom_id}/nodes/{node_id}/split")
async def split_node(loom_id: str, node_id: str, request: Request, principal: ApiKeyDep):
    key = idempotency_key(request)
    return respond(await _service(request).split(loom_id, node_id, await _body(request), principal, key))


@router.post("/v1/looms/{loom_id}/nodes/{node_id}/sibling")
async def add_sibling(loom_id: str, node_id: str, request: Request, principal: ApiKeyDep):
    key = idempotency_key(request)
    return respond(await _service(request).sibling(loom_id, node_id, await _body(request), principal, key))
