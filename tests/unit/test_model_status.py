"""GET /v1/models/{model}/status reads the engine's state and never starts it."""
from __future__ import annotations

import time
from typing import Any

from api.models.service import model_status
from deployments.engine import EngineState
from tests.spec import validate


class StateClient:
    def __init__(self, state: EngineState) -> None:
        self._state = state

    async def state(self) -> EngineState:
        return self._state


class Gateway:
    def __init__(self, state: EngineState, in_flight: int = 0, waiting_since: float | None = None) -> None:
        self.client, self.in_flight, self.waiting_since = StateClient(state), in_flight, waiting_since


class Model:
    id = "tiny-llama"


def services(gateway: Gateway) -> Any:
    return type("S", (), {"gateways": {"tiny-llama": gateway}})()


async def test_a_warm_model_has_no_boot() -> None:
    status = await model_status(Model(), services(Gateway(EngineState(ready=True))))
    validate(status, "ModelStatus")
    assert status["warm"] is True and status["boot"] is None


async def test_a_starting_replica_reports_its_stage() -> None:
    started = time.time() - 42
    status = await model_status(Model(), services(Gateway(EngineState(False, "weights_loading", started))))
    validate(status, "ModelStatus")
    assert status["warm"] is False
    assert status["boot"] == {"stage": "weights_loading", "stage_label": "Loading model weights", "stage_age_s": 42}
    assert status["activation_boot"] == status["boot"]


async def test_a_waiting_request_without_a_replica_waits_for_a_gpu() -> None:
    gateway = Gateway(EngineState(ready=False), in_flight=1, waiting_since=time.time() - 3)
    status = await model_status(Model(), services(gateway))
    assert status["boot"]["stage"] == "waiting_for_gpu" and status["boot"]["stage_age_s"] == 3


async def test_a_cold_model_with_nothing_waiting_has_no_boot() -> None:
    status = await model_status(Model(), services(Gateway(EngineState(ready=False))))
    assert status == {"id": "tiny-llama", "object": "model.status", "warm": False, "boot": None, "activation_boot": None}
