"""GET /health in the old platform's shape: the database, its pool, each model's backend (its
breaker, what it has in flight) and each kind of background work's Runners. It never asks Inference.
Each read is a short transaction of its own, bounded by ACS_HEALTH_TIMEOUT_S."""
from __future__ import annotations

import asyncio
import time
from typing import Any

from sqlalchemy import text

from domain.answers import Answer
from domain.services import Services
from ledger.store.coltypes import utcnow
from ledger.work.queue import queue_states

RUNNER_NAMES = {"job": "jobs", "node": "nodes", "harvest": "harvests", "run": "runs"}


async def health(services: Services) -> Answer:
    """200 while the database answers (`ok`, or `degraded` with its reasons); 503 `down` when it does not."""
    database = await database_check(services)
    backends = [backend_json(m, services.gateways[m.id]) for m in services.served_models()]
    degraded = [b["model_id"] for b in backends if b["breaker_state"] == "open"]
    runners, stale = await runners_check(services) if database["ok"] else ([], [])
    reasons = [f"circuit_open:{model_id}" for model_id in degraded] + stale
    status = "down" if not database["ok"] else ("degraded" if reasons else "ok")
    body = {
        "status": status,
        "wrapper": {
            "uptime_seconds": int(time.time() - services.started_at), "database": database,
            "db_pool": {"saturated": pool_saturated(services.sessions)}, "runners": runners,
        },
        "backends": backends, "degraded_backends": degraded, "degraded_reasons": reasons,
    }
    return Answer(body, 200 if database["ok"] else 503)


async def database_check(services: Services) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(services.settings.health_timeout_s):
            async with services.sessions() as session:
                await session.execute(text("SELECT 1"))
    except Exception:  # noqa: BLE001 - any failure means the database does not answer
        return {"ok": False, "latency_ms": None}
    return {"ok": True, "latency_ms": int((time.perf_counter() - started) * 1000)}


def pool_saturated(sessions: Any) -> bool:
    """Every pooled connection is checked out (SQLite's pool has no fixed size)."""
    pool = sessions.kw["bind"].pool
    overflow = getattr(pool, "_max_overflow", 0)
    if not callable(getattr(pool, "size", None)) or overflow < 0:
        return False
    return pool.checkedout() >= pool.size() + overflow


def backend_json(model: Any, gateway: Any) -> dict[str, Any]:
    breaker = gateway.breaker
    open_for = breaker.retry_after()
    return {
        "model_id": model.id, "status": "live", "gpu_shape": model.gpu_shape,
        "breaker_state": breaker.state, "breaker_consecutive_failures": breaker.consecutive_failures,
        "breaker_open_seconds": open_for, "in_flight": gateway.in_flight,
    }


async def runners_check(services: Services) -> tuple[list[dict[str, Any]], list[str]]:
    """Each kind of background work: how many run, how long ago a Runner checked in;
    and a degraded reason when work waits and no Runner checked in for two leases."""
    try:
        async with asyncio.timeout(services.settings.health_timeout_s):
            async with services.sessions() as session:
                states = await queue_states(session)
    except Exception:  # noqa: BLE001 - the database check reports the database
        return [], []
    now, stale_after = utcnow(), 2 * services.settings.runner_lease_s
    runners, stale = [], []
    for state in (state for state in states if state.kind in services.work_kinds):
        name = RUNNER_NAMES.get(state.kind.value, state.kind.value)
        since = None if state.polled_at is None else int((now - state.polled_at).total_seconds())
        runners.append({"name": name, "running": state.running, "seconds_since_poll": since})
        if state.queued and (since is None or since > stale_after):
            stale.append(f"runner_stale:{name}")
    return runners, stale
