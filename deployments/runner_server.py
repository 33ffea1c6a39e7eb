"""The Ray Serve deployment of the background Runner (deployments/background/runner.py).

It serves no HTTP: it runs the work of the ledger's queues on the model
deployments, through the same engine clients as the ingress. It keeps no
state a restart would lose; Serve's graceful shutdown is the Runner's planned
stop. It runs as one replica, as the platform's operations beside it must
(deployments/operations.py: a second replica would count the spend twice).
"""
from __future__ import annotations

import os
from typing import Any, Callable

from deployments.background.runner import Runner
from deployments.operations import Operations
from deployments.resident import Background
from ledger.work.tables import WorkKind


class RunnerServer:
    async def __init__(self, model_handles: dict[str, Any], profile: str,
                       build_runner: Callable[[dict[str, Any], str], Runner],
                       build_operations: Callable[[dict[str, Any], str], Operations]) -> None:
        # The composition root builds the Runner with its kinds; this replica only hosts it.
        self.runner = build_runner(model_handles, profile)
        # The spend sampler and the warm windows' floor: once per cluster, as this replica is.
        self.background = Background(self.runner, build_operations(model_handles, profile))
        self.background.start()

    async def wake(self, kind: str) -> None:
        """The ingress queued work of `kind` (a WorkKind's value)."""
        self.runner.wake(WorkKind(kind))

    async def owner(self) -> dict[str, Any]:
        """Who this replica is in the ledger (its leases and Holds), and its process."""
        return {"owner": self.runner.owner, "pid": os.getpid()}

    async def check_health(self) -> None:
        await self.background.check_health()

    async def __del__(self) -> None:
        await self.background.stop()
