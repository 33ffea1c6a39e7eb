"""Where a server's CPU goes while the bench measures: core-seconds by process role.

On a 2-core machine every core-second that the serving path spends is taken from
the engine's OpenMP threads, so the CPU per request of each process (proxy, ingress,
model replica, EngineCore, Ray's own) is the breakdown that the Server-Timing
header cannot give under load.
"""
from __future__ import annotations

import os
import time
from typing import Callable

from bench.proc import command_line, cpu_ticks, thread_ticks

# (role, words that must all be in the process's command line), first match wins.
ROLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("engine core", ("EngineCore",)),
    ("engine worker", ("VLLM::Worker",)),
    ("model replica", ("ServeReplica", "model-")),
    ("ingress", ("ServeReplica", "ingress")),
    ("runner", ("ServeReplica", "runner")),
    ("proxy", ("ProxyActor",)),
    ("serve controller", ("ServeController",)),
    ("raylet", ("raylet",)),
    ("gcs", ("gcs_server",)),
    ("dashboard agent", ("DashboardAgent",)),
    ("runtime env agent", ("RuntimeEnvAgent",)),
    ("dashboard", ("dashboard.py",)),
    ("log monitor", ("log_monitor.py",)),
    ("autoscaler monitor", ("monitor.py",)),
    ("vllm api server", ("vllm.entrypoints",)),
    ("driver", ("cluster.embedded",)),
)


# The EngineCore schedules; its worker process (vLLM's "mp" executor) runs the model.
ENGINE_ROLES = ("engine core", "engine worker")


def role_of(command: str) -> str:
    for role, words in ROLES:
        if all(word in command for word in words):
            return role
    return "other"


class ProcessCpu:
    """CPU ticks of each member of the server's session between start() and stop()."""

    def __init__(self, members: Callable[[], list[int]]) -> None:
        self.members = members
        self.tick = os.sysconf("SC_CLK_TCK")

    def _snapshot(self) -> dict[int, tuple[str, int]]:
        out = {}
        for pid in self.members():
            ticks = cpu_ticks(pid)
            if ticks is not None:
                out[pid] = (role_of(command_line(pid)), ticks)
        return out

    def _engine_threads(self) -> dict[str, int]:
        threads: dict[str, int] = {}
        for pid, (role, _) in self.before.items():
            if role in ENGINE_ROLES:
                threads |= {f"{pid}/{name}": t for name, t in thread_ticks(pid).items()}
        return threads

    def start(self) -> None:
        self.before = self._snapshot()
        self.threads_before = self._engine_threads()
        self.t0 = time.monotonic()

    def stop(self) -> dict[str, object]:
        """Core-seconds by role (processes that started meanwhile count from 0), and the
        EngineCore's threads that did work: how many cores its compute really used."""
        elapsed = time.monotonic() - self.t0
        after = self._snapshot()
        by_role: dict[str, float] = {}
        for pid, (role, ticks) in after.items():
            spent = ticks - self.before.get(pid, (role, 0))[1]
            by_role[role] = by_role.get(role, 0.0) + spent / self.tick
        threads_after = self._engine_threads()
        busy_threads = {
            name: round((ticks - self.threads_before.get(name, 0)) / self.tick / elapsed, 3)
            for name, ticks in threads_after.items()
            if (ticks - self.threads_before.get(name, 0)) / self.tick > 0.05 * elapsed
        }
        return {"elapsed_s": round(elapsed, 3),
                "core_s": {role: round(s, 3) for role, s in sorted(by_role.items(), key=lambda kv: -kv[1])},
                "engine_threads_cores": busy_threads}
