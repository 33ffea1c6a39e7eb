"""The boot board: each model replica's start, written where the API can read it.

A replica cannot answer calls while its constructor loads the engine, so it
writes its stage to Ray's internal KV, one entry per replica, keyed by Serve's
own replica id. The status route joins the board with Serve's replica states
(`deployments/replica_states.py`) and never calls a model.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

PREFIX = "acs:boot:"
NAMESPACE = "acs"

# A start's stages in their order (spec: "Check whether a model is Warm").
WAITING_FOR_GPU = "waiting_for_gpu"
CONTAINER_STARTED = "container_started"
WEIGHTS_LOADING = "weights_loading"
WEIGHTS_LOADED = "weights_loaded"
STAGES = (WAITING_FOR_GPU, CONTAINER_STARTED, WEIGHTS_LOADING, WEIGHTS_LOADED)


def deployment_name(model_id: str) -> str:
    return f"model-{model_id}"


@dataclass(frozen=True)
class Start:
    """One replica's start: its stage, and the time that the stage's age counts from."""

    stage: str
    since: float


@dataclass(frozen=True)
class ReplicaReport:
    """What Inference reports of one model: replicas that serve, and starts that run."""

    serving: int
    starts: tuple[Start, ...] = ()

    def leading_start(self) -> Start | None:
        """The start that has got furthest (the oldest among equals): the next to serve."""
        if not self.starts:
            return None
        return min(self.starts, key=lambda s: (-STAGES.index(s.stage), s.since))


def _kv():
    from ray.experimental import internal_kv

    return internal_kv


def _prefix(app_name: str, deployment: str) -> str:
    return f"{PREFIX}{app_name}:{deployment}:"


class BootReporter:
    """Written by one model replica while it starts; silent outside a Serve replica."""

    def __init__(self, key: bytes | None, container_started_at: float) -> None:
        self.key, self.container_started_at = key, container_started_at

    @classmethod
    def of_this_replica(cls) -> BootReporter:
        started = time.time()
        try:
            from ray import serve

            replica = serve.get_replica_context().replica_id
        except Exception:  # noqa: BLE001 - not in a Serve replica (an engine in a test): no board
            return cls(None, started)
        deployment = replica.deployment_id
        return cls(f"{_prefix(deployment.app_name, deployment.name)}{replica.unique_id}".encode(), started)

    def report(self, stage: str) -> None:
        if self.key is None:
            return
        entry = {"stage": stage, "container_started_at": self.container_started_at, "stage_at": time.time()}
        # A lost report only leaves the status a stage behind: the start itself goes on.
        try:
            _kv()._internal_kv_put(self.key, json.dumps(entry).encode(), overwrite=True, namespace=NAMESPACE)
        except Exception:  # noqa: BLE001
            pass

    def clear(self) -> None:
        if self.key is None:
            return
        try:
            _kv()._internal_kv_del(self.key, namespace=NAMESPACE)
        except Exception:  # noqa: BLE001 - the reader erases entries of replicas that Serve no longer lists
            pass


def read_board(app_name: str, deployment: str) -> dict[str, dict]:
    """The board's entries of one deployment, by Serve's replica id."""
    kv, prefix = _kv(), _prefix(app_name, deployment)
    entries = {}
    for key in kv._internal_kv_list(prefix.encode(), namespace=NAMESPACE) or []:
        raw = kv._internal_kv_get(key, namespace=NAMESPACE)
        if raw:
            entries[key.decode().removeprefix(prefix)] = json.loads(raw)
    return entries


def erase(app_name: str, deployment: str, replica_ids: set[str]) -> None:
    kv, prefix = _kv(), _prefix(app_name, deployment)
    for replica_id in replica_ids:
        kv._internal_kv_del(f"{prefix}{replica_id}".encode(), namespace=NAMESPACE)
