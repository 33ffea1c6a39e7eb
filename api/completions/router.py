"""POST /v1/completions, and the refusal of chat."""
from __future__ import annotations

from fastapi import APIRouter, Request

from domain import errors
from api.auth import WorkKeyDep, services_of
from api.body import read_capped, read_json
from api.completions.answers import respond
from api.errors_http import request_id_of
from api.idempotency_header import idempotency_key
from domain.completions.service import CompletionService
from domain.timing import stage

router = APIRouter()

CHAT_REFUSAL = (
    "This API serves Base models, which have no chat format: send POST /v1/completions "
    "with a prompt instead of POST /v1/chat/completions with messages."
)


@router.post("/v1/completions")
async def create_completion(request: Request, principal: WorkKeyDep):
    services = services_of(request)
    key = idempotency_key(request)
    with stage("body"):
        body = await read_json(request, services.settings.max_body_bytes)
    request_id = request_id_of(request)
    assert request_id is not None, "RequestIdMiddleware gives every request its id before a route runs"
    answer = await CompletionService(services).create(body, request_id, principal, key)
    return await respond(answer, services.settings, request_id)


# openapi.json gives this route no security: it refuses before any key check.
@router.post("/v1/chat/completions")
async def chat_completions(request: Request):
    await read_capped(request, services_of(request).settings.max_body_bytes)
    raise errors.ChatCompletionsUnsupported(CHAT_REFUSAL)
