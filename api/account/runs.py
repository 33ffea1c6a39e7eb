"""The App's Playground Runs under /account/runs: start one Run or a group, list, read, stop, stop a
group, delete, read Activations, export, and follow Runs as a stream.

HTTP in and out; the logic is domain/playground/. A session and, for each write, the CSRF token,
as every /account route. The answers that are not JSON documents (the export's file, the stream,
the Activations' text) are Responses of their own: a session renewal that falls on one of them
goes out with the next JSON answer instead.
"""
from __future__ import annotations

import uuid

from fastapi import APIRouter, Request, Response

from api.account.session import AccountDep
from api.admin import bodies
from api.auth import services_of
from api.body import read_json
from api.errors_http import request_id_of
from api.follow_stream import follow_stream
from domain.completions.validation import bad_value
from domain.playground import export, service, stream

router = APIRouter(prefix="/runs")
IDS = "Run ids separated by commas, such as 01a12e70-9370-7a9b-87d6-4c3d2621969e"


def _ids(request: Request, most: int | None = None) -> list[uuid.UUID] | None:
    """The `ids` of the query (Run ids separated by commas), or None without it."""
    value = request.query_params.get("ids")
    if value is None:
        return None
    try:
        ids = [uuid.UUID(part.strip()) for part in value.split(",") if part.strip()]
    except ValueError:
        raise bad_value("ids", IDS) from None
    if not ids or (most is not None and len(ids) > most):
        raise bad_value("ids", f"1 to {most} {IDS}" if most else IDS)
    return list(dict.fromkeys(ids))


@router.post("", status_code=201)
async def start_runs(request: Request, account: AccountDep):
    body = await read_json(request, services_of(request).settings.max_body_bytes)
    return await service.start(services_of(request), account.user_id, body)


@router.get("")
async def list_runs(request: Request, account: AccountDep):
    bodies.read_query(request, ())
    return await service.list_runs(services_of(request), account.user_id)


@router.get("/export")
async def export_runs(request: Request, account: AccountDep):
    query = bodies.read_query(request, ("format", "ids", "every"))
    file_format = export.parse_format(query.get("format"))
    ids, every = _ids(request), bodies.query_flag(request, "every")
    made = await export.export(services_of(request), account.user_id, file_format, ids, every)
    return Response(made.content, media_type=made.media_type,
                    headers={"Content-Disposition": f'attachment; filename="{made.filename}"'})


@router.get("/stream")
async def follow_runs(request: Request, account: AccountDep):
    bodies.read_query(request, ("ids",))
    services = services_of(request)
    updates = await stream.follow(services, account.user_id, _ids(request, stream.MOST_FOLLOWED))
    return follow_stream(updates, services.settings.keepalive_s, request_id_of(request))


@router.post("/groups/{group_id}/stop")
async def stop_group(group_id: str, request: Request, account: AccountDep):
    await bodies.read_fields(request, ())
    wanted = service.parse_run_id(group_id, "group_id")
    return await service.stop_group(services_of(request), account.user_id, wanted)


@router.get("/{run_id}")
async def get_run(run_id: str, request: Request, account: AccountDep):
    bodies.read_query(request, ())
    return await service.get_run(services_of(request), account.user_id, service.parse_run_id(run_id))


@router.get("/{run_id}/activations")
async def get_activations(run_id: str, request: Request, account: AccountDep):
    """The Run's Activations as the API answers them ({"residual_stream": ...}, "Decode the
    tensor"), or null when it read none or they expired."""
    bodies.read_query(request, ())
    data = await service.activations(services_of(request), account.user_id, service.parse_run_id(run_id))
    return Response(data or "null", media_type="application/json")


@router.post("/{run_id}/stop")
async def stop_run(run_id: str, request: Request, account: AccountDep):
    await bodies.read_fields(request, ())
    return await service.stop(services_of(request), account.user_id, service.parse_run_id(run_id))


@router.delete("/{run_id}")
async def delete_run(run_id: str, request: Request, account: AccountDep):
    return await service.delete(services_of(request), account.user_id, service.parse_run_id(run_id))
