"""How work queued in one process reaches the Runner in the same process at once.

The routes' services and the Runner beside them would each need the other built first: the
services tell the Runner of new work, and the Runner runs it with the services. The doorbell is
built before both (cluster/composition.py): the services ring it (`Services.wake_runner`), the
Runner waits on it. A Runner in a replica of its own gets rung by the ingress through its Serve
handle instead (deployments/runner_server.py, `RunnerNudge`), and owns a doorbell nobody else rings.
"""
from __future__ import annotations

import asyncio

from ledger.work.tables import WorkKind


class Doorbell:
    """One event per kind of work: a ring while the Runner is busy stays set until it looks again."""

    def __init__(self) -> None:
        self._rung: dict[WorkKind, asyncio.Event] = {}

    def ring(self, kind: WorkKind) -> None:
        """Work of `kind` was queued (a kind that no Runner here runs rings unheard)."""
        self.event(kind).set()

    def event(self, kind: WorkKind) -> asyncio.Event:
        """What the Runner's claim loop for `kind` waits on."""
        return self._rung.setdefault(kind, asyncio.Event())
