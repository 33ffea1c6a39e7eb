"""What a Serve replica hosts beside its own calls, with one life: started with the
replica, checked by Serve's health check, stopped by its graceful shutdown.

- `Background`: the Runner and the platform's operations (the Runner's replica, or a
  colocated ingress).
- `Colocated`: a colocated profile's engines with the Background, in the ingress's
  replica (deployments/catalog.py, `colocate`).
"""
from __future__ import annotations

from typing import Protocol

from deployments.background.runner import Runner
from deployments.engine import Engine
from deployments.operations import Operations


class Resident(Protocol):
    def start(self) -> None: ...

    async def check_health(self) -> None:
        """Raise when a part stopped for good: Serve then replaces the replica."""

    async def stop(self) -> None:
        """The planned stop; a second call does nothing more."""


class NoResident:
    """A replica that hosts nothing beside its calls."""

    def start(self) -> None:
        pass

    async def check_health(self) -> None:
        pass

    async def stop(self) -> None:
        pass


class Background:
    def __init__(self, runner: Runner, operations: Operations) -> None:
        self.runner, self.operations = runner, operations

    def start(self) -> None:
        self.runner.start()
        self.operations.start()

    async def check_health(self) -> None:
        # A loop that ended is a Runner that stopped working.
        self.runner.check_alive()
        self.operations.check_alive()

    async def stop(self) -> None:
        await self.operations.stop()
        await self.runner.stop()


class Colocated:
    def __init__(self, engines: list[Engine], background: Background) -> None:
        self.engines, self.background = engines, background

    def start(self) -> None:
        self.background.start()

    async def check_health(self) -> None:
        # A dead engine gets the replica replaced, as a model replica's would be.
        for engine in self.engines:
            await engine.check_health()
        await self.background.check_health()

    async def stop(self) -> None:
        # The Runner's grace first, while its work can still reach the engines.
        try:
            await self.background.stop()
        finally:
            for engine in self.engines:
                engine.shutdown()
