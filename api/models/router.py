"""GET /v1/models, one model, and its status."""
from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.convertors import PathConvertor, register_url_convertor

from api.auth import ApiKeyDep, services_of
from domain.models import model_json, model_status

router = APIRouter()


class ModelIdConvertor(PathConvertor):
    """Starlette's `:path`, but over every character: its `.*` stops at a line feed, so such an id got
    404 "No route" instead of the unknown model's 400."""

    regex = r"(?s:.*)"


register_url_convertor("model_id", ModelIdConvertor())


@router.get("/v1/models")
async def list_models(request: Request, _: ApiKeyDep) -> dict:
    services = services_of(request)
    return {"object": "list", "data": [model_json(m, services.catalog) for m in services.served_models()]}


# The served_model_name has a slash; the path convertor takes it encoded or not.
@router.get("/v1/models/{model_id:model_id}/status")
async def get_model_status(model_id: str, request: Request, _: ApiKeyDep) -> dict:
    services = services_of(request)
    model = services.resolve_model(model_id)
    return await model_status(model, services)


@router.get("/v1/models/{model_id:model_id}")
async def get_model(model_id: str, request: Request, _: ApiKeyDep) -> dict:
    services = services_of(request)
    return model_json(services.resolve_model(model_id), services.catalog)
