"""The Model objects and the Warm check; neither ever starts a model."""
from __future__ import annotations

from typing import Any

from domain.services import Services
from deployments.boot import WAITING_FOR_GPU, ReplicaReport, Start

STAGE_LABELS = {
    "waiting_for_gpu": "Waiting for a GPU",
    "container_started": "Starting the model's server",
    "weights_loading": "Loading model weights",
    "weights_loaded": "Preparing memory and kernels",
}
# Without Inference's report, a model counts as Warm this long after Inference
# answered one of its Completions (spec: "Check whether a model is Warm").
FALLBACK_WARM_S = 5 * 60


def model_json(model: Any, catalog: Any) -> dict[str, Any]:
    return {
        "id": model.id, "object": "model", "owned_by": "acs",
        "served_model_name": model.served_model_name, "gpu_shape": model.gpu_shape,
        "status": "live", "default": model.id == catalog.default_id,
        "capabilities": model.capabilities(),
    }


def boot_json(start: Start, now: float) -> dict[str, Any]:
    return {"stage": start.stage, "stage_label": STAGE_LABELS[start.stage],
            "stage_age_s": int(max(0.0, now - start.since))}


def reported_boot(report: ReplicaReport, waiting_since: float | None) -> Start | None:
    """The start that runs, from Inference's report and this process's waiting request."""
    leading = report.leading_start()
    if leading is not None and leading.stage != WAITING_FOR_GPU:
        return leading  # a container starts (beside a serving one, perhaps)
    if report.serving:
        return None  # a container serves: no request waits for a GPU
    # No container yet: a replica that Ray has no resources for, or a request
    # that Serve's autoscaler has not answered with a replica yet. The wait counts
    # from the request; a replica asked for by another process (the Runner's Job,
    # a warm window) counts from Serve's request for it.
    since = [t for t in (waiting_since, leading.since if leading else None) if t is not None]
    return Start(WAITING_FOR_GPU, min(since)) if since else None


def fallback(gateway: Any, now: float) -> tuple[bool, Start | None]:
    """No report: Warm for 5 minutes after an answer; a waiting request waits for a GPU."""
    answered = gateway.last_answered_at
    warm = answered is not None and now - answered < FALLBACK_WARM_S
    waiting = gateway.waiting_since
    return warm, (None if warm or waiting is None else Start(WAITING_FOR_GPU, waiting))


async def model_status(model: Any, services: Any) -> dict[str, Any]:
    gateway = services.gateways[model.id]
    report = await gateway.client.state()
    now = gateway.clock()
    if report is None:
        warm, start = fallback(gateway, now)
    else:
        warm, start = report.serving > 0, reported_boot(report, gateway.waiting_since)
    boot = None if start is None else boot_json(start, now)
    return {"id": model.id, "object": "model.status", "warm": warm, "boot": boot, "activation_boot": boot}


# -- the routes ------------------------------------------------------------------------------------------

def model_list(services: Services) -> dict[str, Any]:
    """GET /v1/models: every served model."""
    return {"object": "list", "data": [model_json(m, services.catalog) for m in services.served_models()]}


def named_model(services: Services, name: str) -> dict[str, Any]:
    """GET /v1/models/{model_id}: the model by its id, served_model_name or alias."""
    return model_json(services.resolve_model(name), services.catalog)


async def named_model_status(services: Services, name: str) -> dict[str, Any]:
    """GET /v1/models/{model_id}/status."""
    return await model_status(services.resolve_model(name), services)
