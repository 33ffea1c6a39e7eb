"""The Ray Serve ingress: the FastAPI app over the services of this replica."""
from __future__ import annotations

import logging
from typing import Any, Callable

from fastapi import FastAPI
from ray import serve

from api.app import create_app
from domain.services import Services

log = logging.getLogger("acs.ingress")


class RunnerNudge:
    """Tells the Runner's replica that work was queued; never waits for it, never fails the request."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner

    def __call__(self, kind: Any) -> None:
        try:
            self.runner.wake.remote(kind.value)
        except Exception:  # noqa: BLE001 - the Runner's poll finds the work anyway
            log.warning("could not nudge the Runner", exc_info=True)


# Late-bound app: Serve pickles an app given to the decorator, so state set
# on a module-level app would never reach the replica's copy.
@serve.deployment
@serve.ingress()
class Ingress:
    async def __init__(self, model_handles: dict[str, Any], profile: str,
                     build_services: Callable[[dict[str, Any], str], Services], runner: Any = None) -> None:
        # The composition root (cluster/composition.py), passed by reference: the API imports no builder.
        self.services = build_services(model_handles, profile)
        self.runner = runner  # the background Runner's handle (Jobs run there, not here)
        if runner is not None:
            self.services.wake_runner = RunnerNudge(runner)
        # Renew this replica's Holds; release those of replicas that died.
        self.services.ledger.leases.start()
        self.services.resident.start()

    async def check_health(self) -> None:
        """Serve's health check: a colocated engine or Runner that stopped gets the replica replaced."""
        await self.services.resident.check_health()

    async def __del__(self) -> None:
        # Serve's graceful shutdown: the Runner's grace, then the colocated engines' stop.
        await self.services.resident.stop()

    def __serve_build_asgi_app__(self) -> FastAPI:
        app = create_app()
        app.state.services = self.services
        return app
