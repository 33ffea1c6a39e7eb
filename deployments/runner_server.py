"""The Ray Serve deployment of the background Runner (api/background/runner.py).

It serves no HTTP: it runs the work of the ledger's queues (Jobs now) on the
model deployments, through the same engine clients as the ingress. It keeps
no state a restart would lose, so it may run as several replicas; Serve's
graceful shutdown is the Runner's planned stop.
"""
from __future__ import annotations

import os
from typing import Any


class RunnerServer:
    async def __init__(self, model_handles: dict[str, Any], profile: str) -> None:
        from api.background.runner import Runner
        from api.ingress import build_services
        from api.jobs.handler import JobHandler

        self.services = build_services(model_handles, profile)
        for model in self.services.served_models():
            self.services.tokenizers.get(model)
        self.runner = Runner(self.services, [JobHandler(self.services)])
        self.runner.start()

    async def owner(self) -> dict[str, Any]:
        """Who this replica is in the ledger (its leases and Holds), and its process."""
        return {"owner": self.runner.owner, "pid": os.getpid()}

    async def check_health(self) -> None:
        """A loop that ended is a Runner that stopped working: Serve replaces the replica."""
        self.runner.check_alive()

    async def __del__(self) -> None:
        await self.runner.stop()
