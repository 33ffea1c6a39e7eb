"""GET /v1/models, one model, and its status: HTTP in and out; the logic is in domain/models.py."""
from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.convertors import PathConvertor, register_url_convertor

from api.auth import ApiKeyDep, services_of
from domain.models import model_list, named_model, named_model_status

router = APIRouter()


class ModelIdConvertor(PathConvertor):
    """Starlette's `:path`, but over every character: its `.*` stops at a line feed, so such an id got
    404 "No route" instead of the unknown model's 400."""

    regex = r"(?s:.*)"


register_url_convertor("model_id", ModelIdConvertor())


@router.get("/v1/models")
async def list_models(request: Request, _: ApiKeyDep) -> dict:
    return model_list(services_of(request))


# The served_model_name has a slash; the path convertor takes it encoded or not.
@router.get("/v1/models/{model_id:model_id}/status")
async def get_model_status(model_id: str, request: Request, _: ApiKeyDep) -> dict:
    return await named_model_status(services_of(request), model_id)


@router.get("/v1/models/{model_id:model_id}")
async def get_model(model_id: str, request: Request, _: ApiKeyDep) -> dict:
    return named_model(services_of(request), model_id)
