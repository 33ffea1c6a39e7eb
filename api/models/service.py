"""The Model objects and the Warm check; neither ever starts a model."""
from __future__ import annotations

import time
from typing import Any

STAGE_LABELS = {
    "waiting_for_gpu": "Waiting for a GPU",
    "container_started": "Starting the model's server",
    "weights_loading": "Loading model weights",
    "weights_loaded": "Preparing memory and kernels",
}


def model_json(model: Any, catalog: Any) -> dict[str, Any]:
    return {
        "id": model.id, "object": "model", "owned_by": "acs",
        "served_model_name": model.served_model_name, "gpu_shape": model.gpu_shape,
        "status": "live", "default": model.id == catalog.default_id,
        "capabilities": model.capabilities(),
    }


def boot_json(stage: str, started_at: float) -> dict[str, Any]:
    return {"stage": stage, "stage_label": STAGE_LABELS[stage], "stage_age_s": int(max(0.0, time.time() - started_at))}


async def model_status(model: Any, services: Any) -> dict[str, Any]:
    gateway = services.gateways[model.id]
    state = await gateway.client.state()
    boot = None
    if state.stage is not None and state.stage_started_at is not None:
        boot = boot_json(state.stage, state.stage_started_at)
    elif not state.ready and gateway.in_flight > 0 and gateway.waiting_since is not None:
        boot = boot_json("waiting_for_gpu", gateway.waiting_since)
    return {"id": model.id, "object": "model.status", "warm": state.ready, "boot": boot, "activation_boot": boot}
