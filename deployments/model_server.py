"""The Ray Serve deployment that hosts one model's engine."""
from __future__ import annotations

from typing import Any, AsyncIterator

from deployments.boot import BootReporter
from deployments.engine import EngineOutput, EngineState, ForwardRequest, GenerateRequest, PromptRows


class ModelServer:
    """One replica: one vLLM engine with vllm-lens, behind the engine boundary."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from deployments.catalog import ModelSpec
        from deployments.vllm_engine import VllmEngine

        model = ModelSpec.model_validate(spec)
        boot = BootReporter(model.id)
        boot.report("container_started")
        boot.report("weights_loading")
        try:
            self.engine = VllmEngine(model.weights_path(), model.vllm_args(), cpu=model.gpu_shape == "cpu")
        finally:
            boot.done()
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

    async def check_health(self) -> None:
        """Serve's health check: a dead engine gets its replica replaced."""
        await self.engine.check_health()

    def __del__(self) -> None:
        # Serve's graceful shutdown of the replica: stop the engine, its
        # EngineCore process and the files it made.
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.shutdown()
