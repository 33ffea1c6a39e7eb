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

    def start(self) -> None:
        self.before = self._snapshot()
        # Every member's threads, not only the engine's: a role may be read only at the end (a
        # command line that could not be read once, or not yet renamed, reads as "other").
        self.threads_before = {pid: thread_ticks(pid) for pid in self.before}
        self.t0 = time.monotonic()

    def stop(self) -> dict[str, object]:
        """Core-seconds by role (processes that started meanwhile count from 0), and the
        EngineCore's threads that did work: how many cores its compute really used."""
        elapsed = time.monotonic() - self.t0
        after = self._snapshot()
        by_role: dict[str, float] = {}
        busy_threads: dict[str, float] = {}
        for pid, (role, ticks) in after.items():
            before_role, before_ticks = self.before.get(pid, ("other", 0))
            role = before_role if role == "other" else role
            by_role[role] = by_role.get(role, 0.0) + (ticks - before_ticks) / self.tick
            if role in ENGINE_ROLES:
                busy_threads |= _busy_threads(pid, self.threads_before.get(pid, {}), elapsed, self.tick)
        return {"elapsed_s": round(elapsed, 3),
                "core_s": {role: round(s, 3) for role, s in sorted(by_role.items(), key=lambda kv: -kv[1])},
                "engine_threads_cores": busy_threads}


def _busy_threads(pid: int, before: dict[str, int], elapsed: float, tick: int) -> dict[str, float]:
    """Cores each thread of `pid` used since `before`, for those above 5% of one."""
    cores = {f"{pid}/{name}": (ticks - before.get(name, 0)) / tick / elapsed
             for name, ticks in thread_ticks(pid).items()}
    return {name: round(used, 3) for name, used in cores.items() if used > 0.05}
