"""GET /health in the old platform's shape; the checks are domain/health.py's."""
from __future__ import annotations

from fastapi import APIRouter, Request, Response

from api.answers import respond
from api.auth import services_of
from domain.health import health as check_health

router = APIRouter()


@router.get("/health")
async def health(request: Request) -> Response:
    return respond(await check_health(services_of(request)))
