"""The Ray Serve deployment of the background Runner (deployments/background/runner.py).

It serves no HTTP: it runs the work of the ledger's queues on the model
deployments, through the same engine clients as the ingress. It keeps no
state a restart would lose; Serve's graceful shutdown is the Runner's planned
stop. It runs as one replica, as the platform's operations beside it must
(deployments/operations.py: a second replica would count the spend twice).
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Callable

from deployments.background.runner import Runner
from deployments.resident import Background
from ledger.work.tables import WorkKind

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle

log = logging.getLogger("acs.ingress")  # the nudge runs in the ingress's replica


class RunnerServer:
    async def __init__(self, model_handles: dict[str, DeploymentHandle], profile: str,
                       build_background: Callable[[dict[str, DeploymentHandle], str], Background]) -> None:
        # The composition root builds the Runner with its kinds, and beside it the spend sampler
        # and the warm windows' floor (once per cluster, as this replica is); this replica only
        # hosts them.
        self.background = build_background(model_handles, profile)
        self.runner: Runner = self.background.runner
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


class RunnerNudge:
    """How the ingress tells the Runner's replica that work was queued (`RunnerServer.wake`): the
    ingress's `Services.wake_runner`. It never waits for the call, and never fails the request."""

    def __init__(self, runner: DeploymentHandle) -> None:
        self.runner = runner

    def __call__(self, kind: WorkKind) -> None:
        try:
            self.runner.wake.remote(kind.value)
        except Exception:  # noqa: BLE001 - the Runner's poll finds the work anyway
            log.warning("could not nudge the Runner", exc_info=True)
