"""How the API reaches a model's engine: through a Serve DeploymentHandle,
or in-process (tests with a fake engine, benches)."""
from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Protocol

from deployments.boot import ReplicaReport, Start
from deployments.engine import Engine, EngineOutput, GenerateRequest

# Serve's controller answers in milliseconds; a status route never waits long for it.
REPORT_TIMEOUT_S = 5.0


class EngineClient(Protocol):
    """The API's view of an `Engine` (deployments/engine.py), in this process or
    behind a handle: the methods of the same names, with the same contracts."""

    def generate(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]: ...

    async def abort(self, request_id: str) -> None: ...

    async def state(self) -> ReplicaReport | None:
        """Inference's report of the model's replicas, or None when there is none to read.
        It never calls a model, so it never starts one."""


class LocalEngineClient:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def generate(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]:
        return self.engine.generate(request)

    async def abort(self, request_id: str) -> None:
        await self.engine.abort(request_id)

    async def state(self) -> ReplicaReport | None:
        # The engine in this process is the model's one replica.
        state = self.engine.state()
        starts = () if state.stage is None else (Start(state.stage, state.stage_started_at or 0.0),)
        return ReplicaReport(serving=int(state.ready), starts=starts)


class HandleEngineClient:
    """A ModelDeployment behind a DeploymentHandle. Cancelling the stream
    cancels the replica's generator, which aborts the vLLM request."""

    def __init__(self, handle: Any, model_id: str) -> None:
        self.handle, self.model_id = handle, model_id

    def generate(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]:
        return self.handle.options(stream=True).generate.remote(request)

    async def abort(self, request_id: str) -> None:
        await self.handle.abort.remote(request_id)

    async def state(self) -> ReplicaReport | None:
        """Serve's replica states and the boot board, read beside the handle: no call through it."""
        from deployments.replica_states import replica_report

        read = asyncio.to_thread(replica_report, self.handle.app_name, self.handle.deployment_name)
        try:
            return await asyncio.wait_for(read, REPORT_TIMEOUT_S)
        except asyncio.TimeoutError:
            return None
