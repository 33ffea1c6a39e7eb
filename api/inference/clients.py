"""How the API reaches a model's engine: through a Serve DeploymentHandle,
or in-process (tests with a fake engine, benches)."""
from __future__ import annotations

from typing import Any, AsyncIterator, Protocol

from deployments.engine import Engine, EngineOutput, EngineState, GenerateRequest


class EngineClient(Protocol):
    """The API's view of an `Engine` (deployments/engine.py), in this process or
    behind a handle: the methods of the same names, with the same contracts."""

    def generate(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]: ...

    async def abort(self, request_id: str) -> None: ...

    async def state(self) -> EngineState: ...


class LocalEngineClient:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def generate(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]:
        return self.engine.generate(request)

    async def abort(self, request_id: str) -> None:
        await self.engine.abort(request_id)

    async def state(self) -> EngineState:
        return self.engine.state()


class HandleEngineClient:
    """A ModelDeployment behind a DeploymentHandle. Cancelling the stream
    cancels the replica's generator, which aborts the vLLM request."""

    def __init__(self, handle: Any, model_id: str, boot_board: Any = None) -> None:
        self.handle, self.model_id, self.boot_board = handle, model_id, boot_board

    def generate(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]:
        return self.handle.options(stream=True).generate.remote(request)

    async def abort(self, request_id: str) -> None:
        await self.handle.abort.remote(request_id)

    async def state(self) -> EngineState:
        from deployments.boot import deployment_state

        return await deployment_state(self.model_id)
