"""The Ray Serve deployment of the background Runner (deployments/background/runner.py).

It serves no HTTP: it runs the work of the ledger's queues on the model
deployments, through the same engine clients as the ingress. It keeps no
state a restart would lose, so it may run as several replicas; Serve's
graceful shutdown is the Runner's planned stop.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from deployments.background.runner import Runner


class RunnerServer:
    async def __init__(self, model_handles: dict[str, Any], profile: str,
                       build_runner: Callable[[dict[str, Any], str], Runner]) -> None:
        # The composition root builds the Runner with its kinds; this replica only hosts it.
        self.runner = build_runner(model_handles, profile)
        self.runner.start()

    async def owner(self) -> dict[str, Any]:
        """Who this replica is in the ledger (its leases and Holds), and its process."""
        return {"owner": self.runner.owner, "pid": os.getpid()}

    async def check_health(self) -> None:
        """A loop that ended is a Runner that stopped working: Serve replaces the replica."""
        self.runner.check_alive()

    async def __del__(self) -> None:
        await self.runner.stop()
