"""The completion-jobs routes: HTTP in and out; the logic is in domain/jobs/service.py."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.answers import respond
from api.auth import ApiKeyDep, WorkKeyDep, services_of
from api.body import read_json
from api.idempotency_header import idempotency_key
from domain.jobs.service import JobService

router = APIRouter()


@router.post("/v1/completion-jobs")
async def create_completion_job(request: Request, principal: WorkKeyDep):
    services = services_of(request)
    key = idempotency_key(request)
    body = await read_json(request, services.settings.max_body_bytes)
    return respond(await JobService(services).submit(body, principal, key))


@router.get("/v1/completion-jobs/{job_id}")
async def get_completion_job(job_id: str, request: Request, principal: ApiKeyDep):
    return await JobService(services_of(request)).get(job_id, principal)


@router.get("/v1/completion-jobs/{job_id}/result")
async def get_completion_job_result(job_id: str, request: Request, principal: ApiKeyDep):
    return respond(await JobService(services_of(request)).result(job_id, principal))


@router.post("/v1/completion-jobs/{job_id}/cancel")
async def cancel_completion_job(job_id: str, request: Request, principal: ApiKeyDep):
    return await JobService(services_of(request)).cancel(job_id, principal)
