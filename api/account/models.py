"""The served models for the App: the filters and the token request's Models read ids and names;
the Playground also reads which model is the default, the limits its settings are checked against,
and whether a model is Warm or how far its start has got (spec: "Wait for a model to start")."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.account.session import AccountDep
from api.admin import bodies
from api.auth import services_of
from api.models.router import ModelIdConvertor  # noqa: F401 - registers the model_id convertor
from domain.models import named_model_status

router = APIRouter()
# What the Playground's form needs of GET /v1/models' `capabilities`.
PLAYGROUND_CAPABILITIES = ("max_model_len", "max_logprobs", "n_layers", "hidden_size", "max_steering_vectors")


@router.get("/models")
async def list_models(request: Request, account: AccountDep):
    bodies.read_query(request, ())
    services = services_of(request)
    default = services.catalog.default_id
    return {"data": [{"id": model.id, "name": model.served_model_name, "default": model.id == default,
                      "gpu_shape": model.gpu_shape,
                      "capabilities": {name: model.capabilities()[name] for name in PLAYGROUND_CAPABILITIES}}
                     for model in services.served_models()]}


@router.get("/models/{model_id:model_id}/status")
async def model_status(model_id: str, request: Request, account: AccountDep):
    """GET /v1/models/{model}/status for the App's session: Warm, or the start's stage; it never
    starts a GPU."""
    bodies.read_query(request, ())
    return await named_model_status(services_of(request), model_id)
