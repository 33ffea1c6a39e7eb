"""GET /v1/models, one model, and its status."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.auth import ApiKeyDep, services_of
from api.models.service import model_json, model_status

router = APIRouter()


@router.get("/v1/models")
async def list_models(request: Request, _: ApiKeyDep) -> dict:
    services = services_of(request)
    return {"object": "list", "data": [model_json(m, services.catalog) for m in services.served_models()]}


# The served_model_name has a slash; `:path` takes it encoded or not.
@router.get("/v1/models/{model_id:path}/status")
async def get_model_status(model_id: str, request: Request, _: ApiKeyDep) -> dict:
    services = services_of(request)
    model = services.resolve_model(model_id)
    return await model_status(model, services)


@router.get("/v1/models/{model_id:path}")
async def get_model(model_id: str, request: Request, _: ApiKeyDep) -> dict:
    services = services_of(request)
    return model_json(services.resolve_model(model_id), services.catalog)
