"""The harvest routes: HTTP in and out; the logic is in domain/harvests/service.py."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.answers import respond
from api.auth import ApiKeyDep, WorkKeyDep, services_of
from api.body import read_json
from domain.harvests.service import HarvestService
from api.idempotency_header import idempotency_key

router = APIRouter()


def _service(request: Request) -> HarvestService:
    return HarvestService(services_of(request), str(request.base_url))


@router.post("/v1/harvest")
async def create_harvest(request: Request, principal: WorkKeyDep):
    # The key is checked first (the dependency); the body is capped as it streams in, chunked too.
    key = idempotency_key(request)
    body = await read_json(request, services_of(request).settings.harvest_max_body_bytes)
    return respond(await _service(request).submit(body, principal, key))


@router.get("/v1/harvest/{job_id}")
async def get_harvest(job_id: str, request: Request, principal: ApiKeyDep, wait: str | None = None):
    return respond(await _service(request).get(job_id, wait, principal, request.is_disconnected))


@router.delete("/v1/harvest/{job_id}")
async def cancel_harvest(job_id: str, request: Request, principal: ApiKeyDep):
    return await _service(request).cancel(job_id, principal)
