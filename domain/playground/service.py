"""The App's Runs routes' logic (/account/runs): start one Run or a group, list, read, stop, stop
a group, delete, read Activations (spec: "Use the Playground", "Find your Runs again").

A start checks each request as POST /v1/completions checks its body, by the same code and with
the same messages (domain/completions: validation, the model, planning and its caps, Steering),
then the spend stop and that the tokens can hold its smallest request, as a Job's submit does. A
request that fails a check is refused, with its error object, and nothing is made for it; the
others start. A Run holds nothing until the Runner runs it (domain/playground/handler.py), and
uses no API key. Each Run counts against the App's 600 a minute of the User (spec: Limits,
Traffic).
"""
from __future__ import annotations

import asyncio
import dataclasses
import secrets
import uuid
from datetime import timedelta
from typing import Any

from domain import errors
from domain.completions.admission import background, hold_ask
from domain.completions.service import CompletionService
from domain.completions.validation import Msg, bad_type, bad_value, reject_unknown_fields
from domain.error_mapping import as_api_error
from domain.playground.news import tell_changed
from domain.playground.views import deleted_json, run_json
from domain.services import Services
from ledger.accounts.keys import Principal
from ledger.tokens.tables import UsageSource
from ledger.work import runs
from ledger.work.runs import NewRun
from ledger.work.tables import WorkKind

# Compare runs up to 6 models; Run all starts one Run for each.
MOST_AT_ONCE = 6
EXAMPLE_ID = "01a12e70-9370-7a9b-87d6-4c3d2621969e"
REQUESTS = ("a list of 1 to 6 requests, each the body of POST /v1/completions")
SEEDS = 2**31  # a chosen seed is below this: any engine and the App's Seed field take it


def parse_run_id(value: str, name: str = "run_id") -> uuid.UUID:
    """A path id; one that is not a UUID is not valid (400, as DESIGN.md decided for every path id)."""
    try:
        return uuid.UUID(value)
    except ValueError:
        what = "a Run id" if name == "run_id" else "a group id"
        raise bad_value(name, f"{what}, a UUID such as {EXAMPLE_ID}") from None


def start_requests(body: Any) -> list[Any]:
    """The requests of a start: {"requests": [1 to 6 bodies of POST /v1/completions]}."""
    if not isinstance(body, dict):
        raise errors.InvalidRequest(Msg.BODY)
    reject_unknown_fields(body, ("requests",))
    requests = body.get("requests")
    if requests is None:
        raise errors.InvalidRequest(Msg.MISSING.format(path="requests"), "requests")
    if not isinstance(requests, list):
        raise bad_type("requests", REQUESTS)
    if not 1 <= len(requests) <= MOST_AT_ONCE:
        raise bad_value("requests", REQUESTS)
    return requests


def _policy(services: Services) -> Any:
    return background(UsageSource.playground, services.settings.background_answer_wait_s)


async def _checked(services: Services, user_id: uuid.UUID, request: Any) -> NewRun:
    """One request, checked as POST /v1/completions checks its body, then the spend stop and the
    tokens of its smallest request (one generated token a choice): the Run's own Hold comes when
    it runs. Raises the refusal."""
    completions = CompletionService(services)
    # Tokenizing a large prompt must not stall the other requests' event loop.
    planned, model = await asyncio.to_thread(completions.prepare, request)
    await services.ledger.check_spend_stop()
    principal = Principal(user_id=user_id, key_id=None, key_name="")
    smallest = dataclasses.replace(hold_ask(planned, principal, model.id, "", _policy(services)), max_tokens=1)
    await services.ledger.check_fits(smallest)
    # A request without `model` runs on the default model, as POST /v1/completions does. One without
    # `seed` gets a seed of its own, kept beside the exact request, so Restore brings the Run back.
    seed = request.get("seed")
    return NewRun(request=request, model=str(request.get("model") or model.id), model_id=model.id,
                  served_model=model.served_model_name, seed=secrets.randbelow(SEEDS) if seed is None else seed)


def _refusal(index: int, error: Exception) -> dict[str, Any]:
    answer = as_api_error(error)
    if answer is None:  # not a refusal: the API's own failure answers the whole request
        raise error
    return {"index": index, "status": answer.status, "error": answer.body(None)["error"]}


async def start(services: Services, user_id: uuid.UUID, body: Any) -> dict[str, Any]:
    """Start a Run for each request that passes its checks: {"runs": [Run...], "refused": [{"index",
    "status", "error"}...]}. The Runs are numbered in the order of their requests; more than one
    form a group (a Run all)."""
    requests = start_requests(body)
    for _ in requests:
        await services.traffic.check_app_user(str(user_id))
    accepted: list[NewRun] = []
    refused: list[dict[str, Any]] = []
    for index, request in enumerate(requests):
        try:
            accepted.append(await _checked(services, user_id, request))
        except Exception as error:  # noqa: BLE001 - a refusal is an answer; anything else is raised again
            refused.append(_refusal(index, error))
    made = []
    if accepted:
        async with services.ledger.write_sessions() as session:
            made = await runs.create(session, user_id, accepted, services.clock())
        services.wake_runner(WorkKind.run)
    now = services.clock()
    return {"runs": [run_json(run, now) for run in made], "refused": refused}


async def list_runs(services: Services, user_id: uuid.UUID) -> dict[str, Any]:
    """The newest 100 Runs, newest first, and the rest of each group that the 100 cut."""
    async with services.sessions() as session:
        found = await runs.listing(session, user_id)
    now = services.clock()
    return {"object": "list", "data": [run_json(run, now, logprobs=False) for run in found]}


async def get_run(services: Services, user_id: uuid.UUID, run_id: uuid.UUID) -> dict[str, Any]:
    async with services.sessions() as session:
        return run_json(await runs.read(session, run_id, user_id), services.clock())


async def activations(services: Services, user_id: uuid.UUID, run_id: uuid.UUID) -> str | None:
    """The Run's Activations as the API answered them (JSON text of {"residual_stream": ...}),
    while they are kept; None when it read none or they expired."""
    async with services.sessions() as session:
        return await runs.activations(session, run_id, user_id, services.clock())


def _kept_for(services: Services) -> timedelta:
    """How long an ended Run's work row keeps its answer (the Run itself stays until deleted)."""
    return timedelta(seconds=services.settings.job_result_kept_s)


async def stop(services: Services, user_id: uuid.UUID, run_id: uuid.UUID) -> dict[str, Any]:
    """Stop the Run: a running one keeps its text and pays for its tokens so far; a queued one
    costs nothing; an ended one stays as it is."""
    async with services.ledger.write_sessions() as session:
        (run,) = await runs.stop(session, [run_id], user_id, services.clock(), _kept_for(services))
    await tell_changed(services.feed, [run_id])
    return run_json(run, services.clock())


async def stop_group(services: Services, user_id: uuid.UUID, group_id: uuid.UUID) -> dict[str, Any]:
    """Stop every Run of a group (Stop all)."""
    async with services.sessions() as session:
        ids = await runs.group_ids(session, user_id, group_id)
    async with services.ledger.write_sessions() as session:
        stopped = await runs.stop(session, ids, user_id, services.clock(), _kept_for(services))
    await tell_changed(services.feed, ids)
    now = services.clock()
    return {"object": "list", "data": [run_json(run, now) for run in stopped]}


async def delete(services: Services, user_id: uuid.UUID, run_id: uuid.UUID) -> dict[str, Any]:
    """Gone at once: a read answers 404 from now on; erased 14 days later."""
    async with services.ledger.write_sessions() as session:
        run = await runs.delete_run(session, run_id, user_id, services.clock(), _kept_for(services))
    await tell_changed(services.feed, [run_id])
    return deleted_json(run)
