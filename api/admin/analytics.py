"""Admin routes of the Analytics tabs that the ledger can count: Users, Budget, Platform, Usage
(the Spend tab is GET /v1/admin/spend). `from` and `to` are UTC days: this month up to today by
default, at most 366 days. HTTP in and out; the counting is `ledger/tokens/analytics.py`, through
`domain/admin/usage.py`."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from api.admin import bodies
from api.auth import AdminDep, services_of
from domain.admin import usage
from domain.completions.validation import text

router = APIRouter(prefix="/v1/admin/analytics")
DAYS = ("from", "to")


async def _tab(request: Request, name: str, known: tuple[str, ...] = DAYS, **narrowed: Any) -> dict:
    bodies.read_query(request, known)
    first, last = bodies.query_day(request, "from"), bodies.query_day(request, "to")
    return await usage.analytics_tab(services_of(request), name, first, last, **narrowed)


@router.get("/users")
async def users_tab(request: Request, admin: AdminDep):
    """New Users and how many ran a Completion within 24 hours, the active ones, engagement."""
    return await _tab(request, "users")


@router.get("/budget")
async def budget_tab(request: Request, admin: AdminDep):
    """The Users at or near their monthly allowance, and the 10 closest with the day it runs out."""
    return await _tab(request, "budget")


@router.get("/platform")
async def platform_tab(request: Request, admin: AdminDep):
    """Completions of each day by how they ended, of each source and model, and the GPU spend."""
    return await _tab(request, "platform")


@router.get("/usage")
async def usage_tab(request: Request, admin: AdminDep):
    """Tokens of each User, model and source, the newest Completions and Budget changes;
    `user_id` and `model` count one User or one model."""
    query = dict(request.query_params)
    user_id = bodies.optional_id(query, "user_id", "a User id")
    model = query.get("model")
    model_id = None if model is None else services_of(request).resolve_model(text(model, "model")).id
    return await _tab(request, "usage", (*DAYS, "user_id", "model"), user_id=user_id, model=model_id)
