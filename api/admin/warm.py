"""Admin routes of warm windows (spec: "Keep a model Warm"): each window records the admin who made
it, and shows what it costs. HTTP in and out; the logic is `domain/admin/warm.py`."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from api.admin import bodies
from api.auth import AdminDep, services_of
from domain.admin import warm
from domain.completions.validation import bad_type, integer, text
from domain.operations import arguments

router = APIRouter(prefix="/v1/admin/warm-windows")
WINDOW = "a warm window id"


def _model(request: Request, body_or_query: dict[str, Any]) -> str:
    """A served model's catalog id, also when named by an alias."""
    name = text(bodies.required(body_or_query, "model"), "model")
    return services_of(request).resolve_model(name).id


@router.get("")
async def list_windows(request: Request, admin: AdminDep):
    """Every window that still counts, with its cost; `?model=` one model's."""
    query = bodies.read_query(request, ("model",))
    model_id = _model(request, query) if "model" in query else None
    return await warm.list_windows(services_of(request), model_id)


@router.post("")
async def add_window(request: Request, admin: AdminDep):
    """A weekly window: `days` (ISO weekdays or mon-fri), `from` and `to` (HH:MM), `time_zone` (UTC)."""
    body = await bodies.read_fields(request, ("model", "days", "from", "to", "time_zone"))
    model_id = _model(request, body)
    days = bodies.required(body, "days")
    if not isinstance(days, (str, list)):
        raise bad_type("days", "a list of days or a text such as mon-fri")
    days = bodies.read_as(arguments.weekdays, days, "days")
    start = bodies.read_as(arguments.minute_of_day, text(bodies.required(body, "from"), "from"), "from", what="From")
    end = bodies.read_as(arguments.minute_of_day, text(bodies.required(body, "to"), "to"), "to", what="To")
    zone = bodies.optional_text(body, "time_zone", "UTC")
    return await warm.add_window(services_of(request), model_id, days, start, end, zone, admin.name)


@router.post("/now")
async def warm_now(request: Request, admin: AdminDep):
    """Keep `model` Warm from now for `hours` (1 to 24); it ends by itself."""
    body = await bodies.read_fields(request, ("model", "hours"))
    model_id = _model(request, body)
    hours = integer(bodies.required(body, "hours"), "hours")
    return await warm.warm_now(services_of(request), model_id, hours, admin.name)


@router.delete("/{window_id}")
async def remove_window(window_id: str, request: Request, admin: AdminDep):
    """Stop a window; the answer is the window as it was, with what it cost."""
    found = bodies.path_id(window_id, "window_id", WINDOW)
    return await warm.remove_window(services_of(request), found)
