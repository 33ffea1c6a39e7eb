"""The Ray Serve deployment that hosts one model's engine."""
from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from deployments.boot import CONTAINER_STARTED, BootReporter
from deployments.engine import EngineOutput, EngineState, ForwardRequest, GenerateRequest, PromptRows

# Serve places that keep_warm calls may hold on a replica beyond the API's own
# per-model in-flight cap, so that a floor never takes a request's place.
KEEP_WARM_PLACES = 1


class ModelServer:
    """One replica: one vLLM engine with vllm-lens, behind the engine boundary."""

    def __init__(self, spec: dict[str, Any]) -> None:
        # The container's start counts from here, before the engine's imports. The
        # board entry stays while the replica lives: Serve's RUNNING state, not its
        # absence, says that the start is over (the status route reads both).
        self.boot = BootReporter.of_this_replica()
        self.boot.report(CONTAINER_STARTED)
        from deployments.catalog import ModelSpec
        from deployments.vllm_engine import VllmEngine

        model = ModelSpec.model_validate(spec)
        self.engine = VllmEngine(model.weights_path(), model.vllm_args(), cpu=model.on_cpu,
                                 on_stage=self.boot.report)
        self.model_id = model.id

    async def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return await self.engine.tokenize(text, add_special_tokens)

    async def generate(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]:
        async for output in self.engine.generate(request):
            yield output

    async def abort(self, request_id: str) -> None:
        await self.engine.abort(request_id)

    async def forward(self, request: ForwardRequest) -> list[PromptRows]:
        return await self.engine.forward(request)

    async def state(self) -> EngineState:
        return self.engine.state()

    async def keep_warm(self, seconds: float) -> None:
        """Stay open for `seconds`: Serve's autoscaler counts one ongoing request
        while it runs, so the model keeps (or starts) one replica. The floor
        keeper of the warm windows calls it again and again while a window is on.
        It runs nothing on the engine."""
        await asyncio.sleep(max(0.0, seconds))

    async def check_health(self) -> None:
        """Serve's health check: a dead engine gets its replica replaced."""
        await self.engine.check_health()

    def __del__(self) -> None:
        # Serve's graceful shutdown of the replica: stop the engine, its
        # EngineCore process and the files it made.
        boot = getattr(self, "boot", None)
        if boot is not None:
            boot.clear()
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.shutdown()
