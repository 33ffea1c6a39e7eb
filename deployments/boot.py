"""Boot stages of model replicas, shared through Ray's internal KV.

A replica cannot answer calls while its constructor loads the engine, so
it writes its stage where the ingress can read it; the status route then
reads Serve's replica states and this board, and never starts a model.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid

from deployments.engine import EngineState

PREFIX = "acs:boot:"
STALE_AFTER_S = 3 * 3600
NAMESPACE = "acs"


def deployment_name(model_id: str) -> str:
    return f"model-{model_id}"


def _kv():
    from ray.experimental import internal_kv

    return internal_kv


class BootReporter:
    """Written by a model replica while its constructor runs."""

    def __init__(self, model_id: str) -> None:
        self.key = f"{PREFIX}{model_id}:{uuid.uuid4().hex}".encode()
        self.started_at = time.time()

    def report(self, stage: str) -> None:
        value = json.dumps({"stage": stage, "started_at": self.started_at, "at": time.time()})
        try:
            _kv()._internal_kv_put(self.key, value.encode(), overwrite=True, namespace=NAMESPACE)
        except Exception:  # noqa: BLE001 - outside Ray (tests) there is no board
            pass

    def done(self) -> None:
        try:
            _kv()._internal_kv_del(self.key, namespace=NAMESPACE)
        except Exception:  # noqa: BLE001
            pass


def _read_boots(model_id: str) -> list[dict]:
    kv = _kv()
    keys = kv._internal_kv_list(f"{PREFIX}{model_id}:".encode(), namespace=NAMESPACE) or []
    boots = []
    for key in keys:
        raw = kv._internal_kv_get(key, namespace=NAMESPACE)
        if raw:
            boot = json.loads(raw)
            if time.time() - boot["at"] < STALE_AFTER_S:
                boots.append(boot)
    return boots


def _running_replicas(model_id: str) -> int:
    from ray import serve

    name = deployment_name(model_id)
    for app in serve.status().applications.values():
        deployment = app.deployments.get(name)
        if deployment is not None:
            return sum(n for state, n in deployment.replica_states.items() if str(state).endswith("RUNNING"))
    return 0


def _state(model_id: str) -> EngineState:
    ready = _running_replicas(model_id) > 0
    boots = sorted(_read_boots(model_id), key=lambda b: b["started_at"])
    if not boots:
        return EngineState(ready=ready)
    first = boots[0]
    return EngineState(ready=ready, stage=first["stage"], stage_started_at=first["started_at"])


async def deployment_state(model_id: str) -> EngineState:
    return await asyncio.to_thread(_state, model_id)
