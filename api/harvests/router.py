"""The harvest routes: HTTP in and out; the logic is in domain/harvests/service.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Callable

from fastapi import APIRouter, Depends, Request

from api.auth import ApiKeyDep, WorkKeyDep, services_of
from api.body import read_json
from domain.harvests.service import HarvestService, LongPolls
from domain.idempotency import idempotency_key
from ledger.store.coltypes import utcnow

router = APIRouter()


@dataclass
class HarvestRoutes:
    """What the harvest routes keep in one process: the waiting reads, and the clock (tests set theirs)."""

    long_polls: LongPolls = field(default_factory=LongPolls)
    clock: Callable[[], datetime] = utcnow


def harvest_routes(request: Request) -> HarvestRoutes:
    state = getattr(request.app.state, "harvest_routes", None)
    if state is None:
        state = request.app.state.harvest_routes = HarvestRoutes()
    return state


def _service(request: Request, routes: HarvestRoutes) -> HarvestService:
    return HarvestService(services_of(request), routes.long_polls, str(request.base_url), routes.clock)


RoutesDep = Annotated[HarvestRoutes, Depends(harvest_routes)]


@router.post("/v1/harvest")
async def create_harvest(request: Request, principal: WorkKeyDep, routes: RoutesDep):
    # The key is checked first (the dependency); the body is capped as it streams in, chunked too.
    key = idempotency_key(request)
    body = await read_json(request, services_of(request).settings.harvest_max_body_bytes)
    return await _service(request, routes).submit(body, principal, key)


@router.get("/v1/harvest/{job_id}")
async def get_harvest(job_id: str, request: Request, principal: ApiKeyDep, routes: RoutesDep,
                      wait: str | None = None):
    return await _service(request, routes).get(job_id, wait, principal, request.is_disconnected)


@router.delete("/v1/harvest/{job_id}")
async def cancel_harvest(job_id: str, request: Request, principal: ApiKeyDep, routes: RoutesDep):
    return await _service(request, routes).cancel(job_id, principal)
