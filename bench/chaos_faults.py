"""The faults of the chaos soak (bench/chaos.py) and the time each kind takes to recover.

A process's fault is a kill -9 of one process of its kind, as cluster/rehearsal.py's
`processes()` finds them on the rehearsal cluster; then the soak waits until the kind has a new
process (where one must come back) and a probe request of that kind succeeds: the time from the
kill is its recovery time.

Redis: the machine's Redis on 6379 is shared with every other helper's stacks, and its DEBUG
command is off (`enable-debug-command no`), so a restart of the server is neither possible through
Redis nor safe for the others. The fault kills every client connection of the platform's own db
index instead (CLIENT KILL ID ...), which is what a restart does to the platform's clients; the
keys stay, where a restart without persistence would lose them.
"""
from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

Probe = Callable[["Fault"], Awaitable[bool]]  # True once a request of the fault's kind succeeds
Processes = dict[str, list[dict[str, Any]]]  # cluster/rehearsal.py's processes(): by kind, each with its pid

# The process kinds of cluster/rehearsal.py that each fault kind kills, by the start of their name.
TARGETS: dict[str, tuple[str, ...]] = {
    "ingress": ("ingress",), "model": ("model:",), "runner": ("runner",),
    "harvest": ("harvest_host:", "harvest_run"), "raylet": ("raylet:models", "raylet:harvest"),
}
# Kinds whose killed process must be replaced (by Serve) before the kind counts as back; a model
# replica, a harvest host and a harvest run come back on demand, when the probe asks for them.
REPLACED = ("ingress", "runner")


def targets(found: Processes, fault_kind: str) -> list[tuple[str, int]]:
    """(process kind, pid) of every process that a fault of `fault_kind` may kill."""
    return sorted((kind, int(item["pid"])) for kind, items in found.items() for item in items
                  if kind.startswith(TARGETS[fault_kind]))


def pick(found: Processes, fault_kind: str, rng: random.Random,
         leave: Iterable[str] = ()) -> tuple[str, int] | None:
    """The (process kind, pid) that a fault of `fault_kind` kills, None when there is none; not
    one of the process kinds in `leave`. A kind of process first, then one of its processes: the
    one harvest host is as likely as the harvests' runs (tens of them, as a run's actor stays
    half an hour after its end)."""
    left = [t for t in targets(found, fault_kind) if t[0] not in set(leave)]
    if not left:
        return None
    process_kind = rng.choice(sorted({kind for kind, _ in left}))
    return rng.choice([t for t in left if t[0] == process_kind])


def kill9(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


@dataclass
class Fault:
    """One fault done: when, to what, and when its kind was back."""

    kind: str
    at_s: float  # seconds after the soak's start
    target: str  # what was killed (a pid and its process, the connections, ...)
    done: bool  # False when there was nothing of the kind to kill then
    recovered_s: float | None = None  # None: not back within the wait
    probe_failures: int = 0
    notes: list[str] = field(default_factory=list)


class Faults:
    """Does each kind of fault and times its recovery. `processes()` lists the cluster's processes;
    `probes[kind](fault)` is True once a request of that kind succeeds; `restart_node(name)` brings
    a worker node back after its raylet's kill (Ray does not restart a raylet: `ray start --address`
    must run again, as a node's supervisor would); `pg_kill()` and `redis_kill()` end the
    platform's connections and say how many."""

    def __init__(self, rng: random.Random, start: float, processes: Callable[[], Awaitable[Processes]],
                 probes: dict[str, Probe], restart_node: Callable[[str], Awaitable[None]],
                 pg_kill: Callable[[], Awaitable[int]], redis_kill: Callable[[], Awaitable[int]],
                 recover_within_s: float = 300.0) -> None:
        self.rng, self.start, self.processes, self.probes = rng, start, processes, probes
        self.restart_node, self.pg_kill, self.redis_kill = restart_node, pg_kill, redis_kill
        self.recover_within_s = recover_within_s
        self.faults: list[Fault] = []
        self.down_nodes: set[str] = set()  # worker nodes being started again: not killed twice at once

    async def do(self, kind: str) -> Fault:
        at = time.monotonic()
        fault = Fault(kind, round(at - self.start, 2), "", False)
        self.faults.append(fault)
        killed: tuple[str, int] | None = None
        if kind == "postgres":
            ended = await self.pg_kill()
            fault.target, fault.done = f"{ended} backends terminated", ended > 0
        elif kind == "redis":
            ended = await self.redis_kill()
            fault.target, fault.done = f"{ended} client connections killed", ended > 0
        else:
            killed = pick(await self.processes(), kind, self.rng, self.down_nodes)
            if killed is None:
                fault.target = "none running"
                return fault
            fault.target, fault.done = f"{killed[0]} pid {killed[1]}", kill9(killed[1])
        if fault.done:
            try:
                await self._recover(fault, at, killed)
            except Exception as e:  # noqa: BLE001 - a fault that could not be undone is recorded, not raised
                fault.notes.append(f"recovery: {type(e).__name__}: {str(e)[:300]}")
        return fault

    async def _recover(self, fault: Fault, at: float, killed: tuple[str, int] | None) -> None:
        """Wait until the kind has a new process again (where Serve must replace it), the worker
        node is started again (a raylet), and its probe succeeds."""
        deadline = at + self.recover_within_s
        if killed is not None:
            await _gone(killed[1])
        if killed is not None and fault.kind == "raylet":
            node = killed[0].split(":", 1)[1]
            self.down_nodes.add(killed[0])
            try:
                await self.restart_node(node)
            finally:
                self.down_nodes.discard(killed[0])
        while time.monotonic() < deadline:
            try:
                back = killed is None or fault.kind not in REPLACED or any(
                    pid != killed[1] for _, pid in targets(await self.processes(), fault.kind) if _ == killed[0])
                ok = back and await asyncio.wait_for(self.probes[fault.kind](fault),
                                                     max(1.0, deadline - time.monotonic()))
            except Exception as e:  # noqa: BLE001 - a probe that fails is tried again until the deadline
                ok = False
                if len(fault.notes) < 3:
                    fault.notes.append(f"probe: {type(e).__name__}: {str(e)[:160]}")
            if ok:
                fault.recovered_s = round(time.monotonic() - at, 2)
                return
            fault.probe_failures += 1
            await asyncio.sleep(0.5)


async def _gone(pid: int, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
