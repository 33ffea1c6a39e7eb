"""The Ray Serve deployment of the background Runner (deployments/background/runner.py).

It serves no HTTP: it runs the work of the ledger's queues on the model
deployments, through the same engine clients as the ingress. It keeps no
state a restart would lose. Its planned stop (running work gets its grace, then
goes back to `queued` with its Hold released) comes two ways: Serve's graceful
shutdown (`serve deploy` of a new version, a scale-down) calls `__del__`, and a
SIGTERM to its process starts it too (`drain_on_sigterm`). It runs as one
replica, as the platform's operations beside it must (deployments/operations.py:
a second replica would count the spend twice).
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Coroutine

from deployments.background.runner import Runner
from deployments.resident import Background
from ledger.work.tables import WorkKind

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle

log = logging.getLogger("acs.ingress")  # the nudge runs in the ingress's replica
runner_log = logging.getLogger("acs.runner")
# What a planned stop takes beyond the Runner's grace: the requeue of each cut attempt (one write
# each), the leases' and the operations' stops. cluster/serve_app.py gives Serve's shutdown this
# much more than the grace, and a SIGTERM's drain waits as long.
STOP_MARGIN_S = 20.0
# What Ray's SIGTERM handler in a worker calls, by its name in ray._private.worker (drain_on_sigterm).
RAY_SIGTERM_EXIT = "raise_sys_exit_with_custom_error_message"


class RunnerServer:
    async def __init__(self, model_handles: dict[str, DeploymentHandle], profile: str,
                       build_background: Callable[[dict[str, DeploymentHandle], str], Background]) -> None:
        # The composition root builds the Runner with its kinds, and beside it the spend sampler
        # and the warm windows' floor (once per cluster, as this replica is); this replica only
        # hosts them.
        self.background = build_background(model_handles, profile)
        self.runner: Runner = self.background.runner
        self.background.start()
        drain_on_sigterm(self.background.stop, asyncio.get_running_loop(), self.runner.grace_s + STOP_MARGIN_S)

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


def drain_on_sigterm(stop: Callable[[], Coroutine[Any, Any, None]], loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
    """A SIGTERM to this process runs `stop` on `loop` (the replica's) before the process exits.

    Ray's worker answers SIGTERM in its main thread: its handler (ray._private.worker's main_loop)
    calls `raise_sys_exit_with_custom_error_message`, and the exit then waits for the replica's
    calls in flight. Left so, the Runner ran its work to the end, however long, kept claiming more,
    and stopped answering Serve's health checks meanwhile: no grace, nothing went back to `queued`
    (the spec's "When the API restarts"). A signal handler can only be set in the main thread, and
    the replica's code never runs there: so the function that Ray's handler calls is wrapped. The
    main thread waits in it for the planned stop (Ray's exit would not wait for the requeue's
    writes); the replica's loop runs meanwhile in its own thread. Where a Ray of another version
    has no such function, a SIGTERM exits as Ray makes it, and the lease recovers the work."""
    import ray
    import ray._private.worker as ray_worker

    if not ray.is_initialized():  # not in a Ray worker (a unit test): no handler of Ray's to wrap
        return
    exit_on_sigterm = getattr(ray_worker, RAY_SIGTERM_EXIT, None)
    if exit_on_sigterm is None:
        runner_log.warning("this Ray's worker has no SIGTERM hook: a SIGTERM stops the Runner without its drain")
        return

    def drain_then_exit(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is threading.main_thread():  # the signal handler's own call
            runner_log.warning("SIGTERM: the Runner drains before its process exits")
            try:
                asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=timeout_s)
            except Exception:  # noqa: BLE001 - the process exits anyway; the leases recover the rest
                runner_log.exception("the Runner's drain on SIGTERM did not finish")
        return exit_on_sigterm(*args, **kwargs)

    setattr(ray_worker, RAY_SIGTERM_EXIT, drain_then_exit)


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
