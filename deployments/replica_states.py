"""Serve's replica states of one model, joined with the boot board.

Serve lists each replica from the moment it asks Ray for one: STARTING without
an actor while Ray finds its resources (Serve's PENDING_ALLOCATION: the GPU is
not there yet), STARTING with an actor while its constructor runs, RUNNING
once it serves. The constructor's own stages come from the board. Nothing here
calls a replica, so reading never starts one.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any

from deployments.boot import CONTAINER_STARTED, WAITING_FOR_GPU, ReplicaReport, Start, erase, read_board

SERVING = {"RUNNING", "PENDING_MIGRATION"}  # a replica being moved off a draining node still serves
STARTING = "STARTING"


def serve_replicas(app_name: str, deployment: str) -> list[dict[str, Any]] | None:
    """Serve's details of each replica of the deployment; None when Serve does not list it."""
    from ray.serve.context import _get_global_client

    client = _get_global_client(raise_if_no_controller_running=False)
    if client is None:
        return None
    app = client.get_serve_details().get("applications", {}).get(app_name)
    found = (app or {}).get("deployments", {}).get(deployment)
    return None if found is None else list(found.get("replicas", []))


def replica_start(replica: dict[str, Any], entry: dict | None, now: float) -> Start:
    """The stage of one STARTING replica."""
    if not replica.get("actor_id"):
        return Start(WAITING_FOR_GPU, replica.get("start_time_s") or now)
    if entry is None:
        # The actor is up and its constructor has not written yet (a moment): it just started.
        return Start(CONTAINER_STARTED, now)
    return Start(entry["stage"], entry["container_started_at"])


def join(replicas: list[dict[str, Any]], board: dict[str, dict], now: float) -> ReplicaReport:
    serving = sum(1 for r in replicas if r.get("state") in SERVING)
    starts = tuple(replica_start(r, board.get(r["replica_id"]), now)
                   for r in replicas if r.get("state") == STARTING)
    return ReplicaReport(serving=serving, starts=starts)


def replica_report(app_name: str, deployment: str) -> ReplicaReport | None:
    """The model's report, or None when Ray's state cannot be read (the caller falls back)."""
    try:
        # The board first: an entry on it belongs to a replica that Serve lists by then.
        board = read_board(app_name, deployment)
        replicas = serve_replicas(app_name, deployment)
    except Exception:  # noqa: BLE001 - Ray or its controller does not answer
        return None
    if replicas is None:
        return None
    gone = set(board) - {r["replica_id"] for r in replicas}
    with contextlib.suppress(Exception):  # replicas that died without clearing their entry
        erase(app_name, deployment, gone)
    return join(replicas, board, time.time())
