"""The Loom routes: HTTP in and out. The logic: domain/looms/service.py (the Loom, Branch, stop),
domain/looms/changes.py (the tree's edits), domain/looms/files.py (export, import), domain/looms/stream.py."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.auth import ApiKeyDep, WorkKeyDep, services_of
from api.body import read_json
from api.errors_http import request_id_of
from domain.idempotency import idempotency_key
from domain.looms import changes
from domain.looms import files
from domain.looms import stream
from domain.looms.service import LoomService, parse_id

router = APIRouter()


def _service(request: Request) -> LoomService:
    return LoomService(services_of(request))


async def _body(request: Request):
    return await read_json(request, services_of(request).settings.max_body_bytes)


@router.get("/v1/looms")
async def list_looms(request: Request, principal: ApiKeyDep):
    return await _service(request).list(principal)


@router.post("/v1/looms")
async def create_loom(request: Request, principal: ApiKeyDep):
    key = idempotency_key(request)
    return await _service(request).create(await _body(request), principal, key)


@router.post("/v1/looms/import")
async def import_loom(request: Request, principal: ApiKeyDep):
    key, body, service = idempotency_key(request), await _body(request), _service(request)
    return await service.once(principal, key, "POST /v1/looms/import", body,
                              lambda: files.import_(service.services, body, principal))


@router.get("/v1/looms/{loom_id}/export")
async def export_loom(loom_id: str, request: Request, principal: ApiKeyDep):
    return await files.export(services_of(request), loom_id, principal)


@router.get("/v1/looms/{loom_id}")
async def get_loom(loom_id: str, request: Request, principal: ApiKeyDep):
    return await _service(request).get(loom_id, principal)


@router.post("/v1/looms/{loom_id}")
async def update_loom(loom_id: str, request: Request, principal: ApiKeyDep):
    key = idempotency_key(request)
    return await _service(request).change(loom_id, await _body(request), principal, key)


@router.delete("/v1/looms/{loom_id}")
async def delete_loom(loom_id: str, request: Request, principal: ApiKeyDep):
    return await _service(request).delete(loom_id, principal, idempotency_key(request))


@router.get("/v1/looms/{loom_id}/stream")
async def stream_loom(loom_id: str, request: Request, principal: ApiKeyDep):
    return await stream.follow(services_of(request), parse_id(loom_id, "loom"), principal,
                               request_id_of(request))


@router.post("/v1/looms/{loom_id}/cancel")
async def cancel_loom(loom_id: str, request: Request, principal: ApiKeyDep):
    return await _service(request).cancel(loom_id, principal, idempotency_key(request))


@router.post("/v1/looms/{loom_id}/nodes/{node_id}/branch")
async def create_branch(loom_id: str, node_id: str, request: Request, principal: WorkKeyDep):
    key = idempotency_key(request)
    return await _service(request).branch(loom_id, node_id, await _body(request), principal, key)


# -- the tree's edits: the same Idempotency-Key rule around each ------------------------------------

async def _change(request: Request, principal, route: str, change, *args, with_body: bool = True):
    key, service = idempotency_key(request), _service(request)
    body = await _body(request) if with_body else None
    return await service.once(principal, key, route, body,
                              lambda: change(service.services, *args, *((body,) if with_body else ()), principal))


@router.post("/v1/looms/{loom_id}/root")
async def set_root(loom_id: str, request: Request, principal: ApiKeyDep):
    return await _change(request, principal, f"POST /v1/looms/{loom_id}/root", changes.new_root, loom_id)


@router.post("/v1/looms/{loom_id}/nodes/{node_id}")
async def edit_node(loom_id: str, node_id: str, request: Request, principal: ApiKeyDep):
    return await _change(request, principal, f"POST /v1/looms/{loom_id}/nodes/{node_id}", changes.edit,
                         loom_id, node_id)


@router.delete("/v1/looms/{loom_id}/nodes/{node_id}")
async def delete_node(loom_id: str, node_id: str, request: Request, principal: ApiKeyDep):
    return await _change(request, principal, f"DELETE /v1/looms/{loom_id}/nodes/{node_id}", changes.delete_node,
                         loom_id, node_id, with_body=False)


@router.post("/v1/looms/{loom_id}/nodes/{node_id}/split")
async def split_node(loom_id: str, node_id: str, request: Request, principal: ApiKeyDep):
    return await _change(request, principal, f"POST /v1/looms/{loom_id}/nodes/{node_id}/split", changes.split,
                         loom_id, node_id)


@router.post("/v1/looms/{loom_id}/nodes/{node_id}/sibling")
async def add_sibling(loom_id: str, node_id: str, request: Request, principal: ApiKeyDep):
    return await _change(request, principal, f"POST /v1/looms/{loom_id}/nodes/{node_id}/sibling", changes.sibling,
                         loom_id, node_id)
