"""The Ray Serve ingress: the FastAPI app over the services of this replica."""
from __future__ import annotations

from typing import Callable

from fastapi import FastAPI
from ray import serve
from ray.serve.handle import DeploymentHandle

from api.app import create_app
from domain.services import IngressReplica

# Builds this replica from the models' handles, the profile and the Runner's handle (None where the
# replica hosts its own Runner): cluster/composition.py's ingress_replica or colocated_replica.
BuildReplica = Callable[[dict[str, DeploymentHandle], str, DeploymentHandle | None], IngressReplica]


# Late-bound app: Serve pickles an app given to the decorator, so state set
# on a module-level app would never reach the replica's copy.
@serve.deployment
@serve.ingress()
class Ingress:
    async def __init__(self, model_handles: dict[str, DeploymentHandle], profile: str, build_replica: BuildReplica,
                       runner: DeploymentHandle | None = None) -> None:
        # The composition root, passed by reference: the API imports no builder. It wires the
        # routes' nudge of the Runner (`runner`, the background Runner's handle) into the services.
        replica = build_replica(model_handles, profile, runner)
        self.services, self.resident = replica.services, replica.resident
        self.runner = runner  # held, so that Serve deploys the Runner beside the ingress
        # Renew this replica's Holds; release those of replicas that died.
        self.services.ledger.leases.start()
        self.resident.start()

    async def check_health(self) -> None:
        """Serve's health check: a colocated engine or Runner that stopped gets the replica replaced."""
        await self.resident.check_health()

    async def __del__(self) -> None:
        # Serve's graceful shutdown: the Runner's grace, then the colocated engines' stop.
        await self.resident.stop()

    def __serve_build_asgi_app__(self) -> FastAPI:
        app = create_app()
        app.state.services = self.services
        return app
