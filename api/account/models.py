"""The served models, for the App's filters and the token request's Models: ids and names only."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.account.session import AccountDep
from api.admin import bodies
from api.auth import services_of

router = APIRouter()


@router.get("/models")
async def list_models(request: Request, account: AccountDep):
    bodies.read_query(request, ())
    services = services_of(request)
    return {"data": [{"id": model.id, "name": model.served_model_name} for model in services.served_models()]}
