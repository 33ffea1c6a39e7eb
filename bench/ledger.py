"""The ledger: Hold + settle pairs per second on PostgreSQL, then an overspend check.

    python bench/ledger.py [--concurrency 32] [--duration 10] [--count N]
        [--warmup 2] [--modes separate,one] [--processes 1] [--path hot|session]
        [--rounds 1] [--no-baseline] [--json out.json]

One fresh, migrated database (`acs_bench_ledger`, dropped and made again on
every run). `--concurrency` workers each loop: a Hold (the tests' `sky()`
ask: 4 prompt tokens, 1 choice, max_tokens 50, may_lower, so a Hold of 54
tokens), then its settlement to `tokens - (i % 7)`, the way the API's
TokenLedger does it: `take_hold_on` / `end_hold_on` straight on a
`make_engine` engine's pool (its checkout ping too), no session (`--path
session`: `take_hold` / `end_hold` in a session each, the session API). Two
modes:

- separate: one User per worker, each with a large monthly allowance: no two
  Holds wait on the same row lock;
- one: every worker on ONE User, whose allowance runs out partway through
  (0.5 x the pairs its warm-up rate predicts x 54): every Hold and every
  settle waits on the same User and MonthlyUsage row locks, and shortfalls
  (and Holds lowered to the little that is left) are counted apart.

All workers run in this process (one event loop, one engine with a pool of
`--concurrency` connections), as in one API replica; `--processes N` splits
them over N processes, each with its own engine, to see past one Python
process's CPU.

Beside them, the baseline: the simplest two-transaction loop on this
PostgreSQL (per iteration twice `BEGIN; SELECT 1; UPDATE counter row;
COMMIT`), with asyncpg on one held connection per worker (the database's raw
rate), on one row per worker and on one row for all, and the same loop
through a SQLAlchemy session per transaction (what the ledger's plumbing
costs before any ledger logic). The report gives the ledger's share of the
raw rate. Every line gives the CPU per pair of the bench's process(es) (with
the ledger's workers only in it: the ingress CPU per request that the ledger
costs; in the one-user mode the shortfalls' CPU is in it too) and of
PostgreSQL.

At the end, the overspend check, per User: the MonthlyUsage equals the
settled Holds' `used` plus the open Holds' `tokens` (and the Budget its
Grants less what it paid), never above the allowance (sampled every 50 ms
during the run too), no counter below 0, no Hold left `held`, and the
database's totals equal what the workers saw. Exit 1 if it fails.

`--rounds N` runs the raw loops and the ledger's modes N times, one after the
other, each round on Users of its own, and gives each round's ratios and
their medians: on a machine whose speed drifts (a hypervisor's steal), one
round's raw loop and its ledger run under the same conditions, while two
runs may not.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import asyncpg  # noqa: E402
from sqlalchemy import text  # noqa: E402

from ledger.store.db import make_engine, session_factory  # noqa: E402
from ledger.tokens.grants import set_allowance  # noqa: E402
from ledger.accounts.keys import create_api_key, create_user  # noqa: E402
from ledger.store.migrate import upgrade  # noqa: E402
from ledger.store.pg_admin import ADMIN_DSN, drop_database, recreate_database  # noqa: E402
from ledger.tokens.tables import Counting, UsageStatus  # noqa: E402
from ledger.tokens.holds import (  # noqa: E402
    DEFAULT_MONTHLY_ALLOWANCE, Held, HoldAsk, Shortfall, end_hold, end_hold_on, take_hold, take_hold_on,
)
from bench.proc import proc_stat_fields  # noqa: E402

# sqlmodel's AsyncSession.execute() warns on every call (the ledger's code calls it too).
warnings.filterwarnings("ignore", message=r"(?s).*You probably want to use `session.exec", category=DeprecationWarning)

DATABASE = "acs_bench_ledger"
HOLD_TOKENS = 54            # sky(): 4 prompt tokens + 1 choice x 50
BIG_ALLOWANCE = 10**12      # separate users and warm-ups never run out
SHARED_FILL = 0.5           # the shared User's allowance: this share of the expected pairs x 54
MONITOR_EVERY_S = 0.05
OTHER_CPU_WARN = 0.10
T = TypeVar("T")


def sky(user_id: uuid.UUID, key_id: uuid.UUID) -> HoldAsk:
    """tests/unit/test_tokens.py's sky(user, key, 50), as the API's TokenLedger fills it in."""
    return HoldAsk(user_id=user_id, key_id=key_id, model="tiny-llama", prompt_tokens=4, choices=1,
                   max_tokens=50, may_lower=True, owner="bench-ledger", lease_s=600.0)


# -- figures -------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)




class CpuMeter:
    """CPU used while a phase ran, in cores: this process, PostgreSQL's processes, the rest.

    PostgreSQL's share counts every postgres process (backends of other
    databases too, and the postmaster's reaped children).
    """

    def __init__(self, child_pids: list[int] | None = None) -> None:
        self.tick = os.sysconf("SC_CLK_TCK")
        self.child_pids = child_pids or []

    def _children(self) -> int:
        total = 0
        for pid in self.child_pids:
            fields = proc_stat_fields(pid)
            if fields is not None:
                total += int(fields[11]) + int(fields[12])  # utime stime
        return total

    @staticmethod
    def _busy() -> tuple[int, int]:
        """user + nice + system of all CPUs, and steal (time the hypervisor gave elsewhere)."""
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return values[0] + values[1] + values[2], values[7]

    @staticmethod
    def _postgres() -> int:
        total = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if Path(f"/proc/{entry.name}/comm").read_text().strip() != "postgres":
                    continue
            except OSError:
                continue
            fields = proc_stat_fields(entry.name)
            if fields is not None:
                total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
        return total

    def start(self) -> None:
        times = os.times()
        self.t0, self.busy0, self.pg0 = time.monotonic(), self._busy(), self._postgres()
        self.self0, self.kids0 = times.user + times.system, self._children()

    def stop(self) -> dict[str, float]:
        times = os.times()
        wall = time.monotonic() - self.t0
        busy_now, steal_now = self._busy()
        busy, steal = (busy_now - self.busy0[0]) / self.tick, (steal_now - self.busy0[1]) / self.tick
        pg = (self._postgres() - self.pg0) / self.tick
        own = times.user + times.system - self.self0 + (self._children() - self.kids0) / self.tick
        other = max(0.0, busy - pg - own)
        cores = lambda seconds: round(seconds / wall, 2) if wall > 0 else 0.0  # noqa: E731
        return {"bench_cores": cores(own), "postgres_cores": cores(pg), "other_cores": cores(other),
                "bench_cpu_s": round(own, 3), "postgres_cpu_s": round(pg, 3),
                "steal_cores": cores(steal),
                "other_share": round(other / (wall * (os.cpu_count() or 1)), 3) if wall > 0 else 0.0}


@dataclass
class Tally:
    """What the workers of one phase saw."""

    pairs: int = 0               # Holds taken and settled
    shortfalls: int = 0
    lowered: int = 0             # Holds whose max_tokens came down from 50
    window_pairs: int = 0        # pairs that ended inside the timed window
    window_shortfalls: int = 0
    first_shortfall_s: float | None = None
    hold_s: list[float] = field(default_factory=list)
    settle_s: list[float] = field(default_factory=list)
    shortfall_s: list[float] = field(default_factory=list)
    iteration_s: list[float] = field(default_factory=list)
    pair_end_s: list[float] = field(default_factory=list)     # when each timed pair ended, from the start
    used: dict[uuid.UUID, int] = field(default_factory=dict)   # tokens settled, per user
    settled: dict[uuid.UUID, int] = field(default_factory=dict)  # Holds settled, per user


class Clock:
    """Duration mode: stop starting iterations at `end`; count mode: a shared budget of iterations."""

    def __init__(self, duration: float | None, count: int | None) -> None:
        self.duration, self.count = duration, count
        self.left = count

    def begin(self) -> None:
        self.t0 = time.perf_counter()
        self.end = self.t0 + self.duration if self.duration is not None else float("inf")

    def another(self) -> bool:
        if self.left is not None:
            if self.left <= 0:
                return False
            self.left -= 1
            return True
        return time.perf_counter() < self.end

    def in_window(self, moment: float) -> bool:
        return moment <= self.end

    def elapsed(self, moment: float) -> float:
        return moment - self.t0


async def run_workers(concurrency: int, worker: Callable[[int, Clock], Awaitable[None]], clock: Clock) -> float:
    """Run the workers; the phase's wall time (the duration, or until the count was done)."""
    clock.begin()
    await asyncio.gather(*(worker(w, clock) for w in range(concurrency)))
    finished = time.perf_counter()
    return clock.duration if clock.duration is not None else finished - clock.t0


async def measured(phase: Awaitable[T], child_pids: list[int] | None = None) -> tuple[T, dict[str, float]]:
    """The phase's result, and the CPU it took (see CpuMeter)."""
    meter = CpuMeter(child_pids)
    meter.start()
    result = await phase
    return result, meter.stop()


# -- the baseline ----------------------------------------------------------------
async def timed_loop(concurrency: int, iteration: Callable[[int], Awaitable[None]], duration: float | None,
                     count: int | None, warmup: float) -> dict[str, Any]:
    """Workers repeating `iteration(worker)`: a warm-up, then the timed phase's figures."""
    async def one_phase(clock: Clock, tally: Tally) -> float:
        async def worker(w: int, clock: Clock) -> None:
            while clock.another():
                t0 = time.perf_counter()
                await iteration(w)
                t1 = time.perf_counter()
                if clock.in_window(t1):
                    tally.window_pairs += 1
                    tally.iteration_s.append(t1 - t0)
        return await run_workers(concurrency, worker, clock)

    if warmup > 0:
        await one_phase(Clock(warmup, None), Tally())
    tally = Tally()
    wall, cpu = await measured(one_phase(Clock(duration, count), tally))
    return {"pairs": tally.window_pairs, "seconds": round(wall, 3),
            "pairs_per_s": round(tally.window_pairs / wall, 1), **cpu_per_pair(cpu, tally.window_pairs),
            "p50_pair_ms": ms(percentile(tally.iteration_s, 0.5)),
            "p90_pair_ms": ms(percentile(tally.iteration_s, 0.9)), "cpu": cpu}


async def baseline_asyncpg(dsn: str, concurrency: int, shared_row: bool, duration: float | None,
                           count: int | None, warmup: float) -> dict[str, Any]:
    """Per iteration two transactions `SELECT 1; UPDATE counter`, on one held connection per worker."""
    connections = [await asyncpg.connect(dsn) for _ in range(concurrency)]

    async def iteration(w: int) -> None:
        conn, row = connections[w], 0 if shared_row else w
        for _ in range(2):
            async with conn.transaction():
                await conn.fetchval("SELECT 1")
                await conn.execute("UPDATE bench_counter SET n = n + 1 WHERE id = $1", row)

    try:
        return await timed_loop(concurrency, iteration, duration, count, warmup)
    finally:
        for conn in connections:
            await conn.close()


async def baseline_sqlalchemy(url: str, concurrency: int, duration: float | None, count: int | None,
                              warmup: float) -> dict[str, Any]:
    """The same loop, each transaction in its own session of a make_engine pool (as the ledger)."""
    engine = make_engine(url, pool_size=concurrency, max_overflow=4)
    sessions = session_factory(engine)
    select_one = text("SELECT 1")
    update = text("UPDATE bench_counter SET n = n + 1 WHERE id = :row")

    async def iteration(w: int) -> None:
        for _ in range(2):
            async with sessions() as session:
                await session.execute(select_one)
                await session.execute(update, {"row": w})
                await session.commit()

    try:
        return await timed_loop(concurrency, iteration, duration, count, warmup)
    finally:
        await engine.dispose()


# -- the ledger ------------------------------------------------------------------
async def new_user(sessions: Any, name: str, allowance: int | None) -> tuple[uuid.UUID, uuid.UUID]:
    async with sessions() as session:
        user = await create_user(session, name)
        key, _ = await create_api_key(session, user.id, "bench")
        await session.commit()
    async with sessions() as session:
        await set_allowance(session, user.id, allowance)
    return user.id, key.id


async def ledger_phase(engine: Any, asks: list[HoldAsk], clock: Clock, path: str = "hot") -> tuple[Tally, float]:
    """One worker per ask: a Hold, then its end with `tokens - (i % 7)`, until the clock says stop.

    path "hot": take_hold_on / end_hold_on on the engine (the API's TokenLedger);
    "session": take_hold / end_hold, each in its own session (the session API).
    """
    tally = Tally()
    sessions = session_factory(engine)

    async def worker(w: int, clock: Clock) -> None:
        ask, i = asks[w], w
        while clock.another():
            i += 1
            t0 = time.perf_counter()
            if path == "hot":
                result = await take_hold_on(engine, ask)
            else:
                async with sessions() as session:
                    result = await take_hold(session, ask)
            t1 = time.perf_counter()
            if isinstance(result, Shortfall):
                tally.shortfalls += 1
                if clock.in_window(t1):
                    tally.window_shortfalls += 1
                    tally.shortfall_s.append(t1 - t0)
                if tally.first_shortfall_s is None:
                    tally.first_shortfall_s = clock.elapsed(t1)
                continue
            assert isinstance(result, Held)
            used = max(0, result.tokens - i % 7)
            if path == "hot":
                ended = await end_hold_on(engine, result.hold_id, used=used, counting=Counting.reported,
                                          status=UsageStatus.completed)
            else:
                async with sessions() as session:
                    ended = await end_hold(session, result.hold_id, used=used, counting=Counting.reported,
                                           status=UsageStatus.completed)
            t2 = time.perf_counter()
            if not ended:
                raise RuntimeError(f"Hold {result.hold_id} had ended already")
            tally.pairs += 1
            tally.lowered += result.max_tokens < ask.max_tokens
            tally.used[ask.user_id] = tally.used.get(ask.user_id, 0) + used
            tally.settled[ask.user_id] = tally.settled.get(ask.user_id, 0) + 1
            if clock.in_window(t2):
                tally.window_pairs += 1
                tally.hold_s.append(t1 - t0)
                tally.settle_s.append(t2 - t1)
                tally.pair_end_s.append(clock.elapsed(t2))

    wall = await run_workers(len(asks), worker, clock)
    return tally, wall


def merge(tallies: list[Tally]) -> Tally:
    total = Tally()
    for t in tallies:
        total.pairs += t.pairs
        total.shortfalls += t.shortfalls
        total.lowered += t.lowered
        total.window_pairs += t.window_pairs
        total.window_shortfalls += t.window_shortfalls
        if t.first_shortfall_s is not None:
            total.first_shortfall_s = min(t.first_shortfall_s, total.first_shortfall_s or float("inf"))
        for name in ("hold_s", "settle_s", "shortfall_s", "iteration_s", "pair_end_s"):
            getattr(total, name).extend(getattr(t, name))
        for name in ("used", "settled"):
            mine = getattr(total, name)
            for user_id, value in getattr(t, name).items():
                mine[user_id] = mine.get(user_id, 0) + value
    return total


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (i < total % parts) for i in range(parts)]


def child_main(conn: Any, url: str, pool_size: int, path: str) -> None:
    """A worker process of --processes: runs the phases the parent sends, with its own engine."""
    asyncio.run(_child(conn, url, pool_size, path))


async def _child(conn: Any, url: str, pool_size: int, path: str) -> None:
    engine = make_engine(url, pool_size=pool_size, max_overflow=4)
    write_engine = engine.execution_options(sqlite_begin="IMMEDIATE")
    loop = asyncio.get_running_loop()
    try:
        while True:
            command = await loop.run_in_executor(None, conn.recv)
            if command is None:
                break
            asks, duration, count, start_at = command
            try:
                await asyncio.sleep(max(0.0, start_at - time.monotonic()))
                conn.send(("ok", *(await ledger_phase(write_engine, asks, Clock(duration, count), path))))
            except Exception:  # handed to the parent, which stops the run
                import traceback
                conn.send(("error", traceback.format_exc(), 0.0))
    finally:
        await engine.dispose()


class LedgerRunner:
    """Runs ledger phases in this process, or with the workers split over --processes children.

    On a machine with more cores, children show what the database side can take.
    """

    def __init__(self, url: str, concurrency: int, processes: int, path: str = "hot") -> None:
        self.url, self.concurrency, self.processes, self.path = url, concurrency, processes, path
        self.children: list[tuple[Any, Any]] = []  # (process, pipe)

    async def start(self) -> None:
        setup_pool = self.concurrency if self.processes == 1 else 4
        self.engine = make_engine(self.url, pool_size=setup_pool, max_overflow=4)
        # As domain.services.build_ledger: the write sessions (the option only matters on SQLite).
        self.write_engine = self.engine.execution_options(sqlite_begin="IMMEDIATE")
        self.sessions = session_factory(self.write_engine)
        if self.processes > 1:
            import multiprocessing
            context = multiprocessing.get_context("spawn")
            for share in split(self.concurrency, self.processes):
                parent_end, child_end = context.Pipe()
                process = context.Process(target=child_main, args=(child_end, self.url, share, self.path), daemon=True)
                process.start()
                self.children.append((process, parent_end))

    @property
    def child_pids(self) -> list[int]:
        return [process.pid for process, _ in self.children]

    async def phase(self, asks: list[HoldAsk], duration: float | None, count: int | None) -> tuple[Tally, float]:
        if not self.children:
            return await ledger_phase(self.write_engine, asks, Clock(duration, count), self.path)
        loop = asyncio.get_running_loop()
        shares = split(len(asks), len(self.children))
        counts = split(count, len(self.children)) if count is not None else [None] * len(self.children)
        start_at = time.monotonic() + 0.2
        first = 0
        for (_, pipe), share, share_count in zip(self.children, shares, counts):
            pipe.send((asks[first:first + share], duration, share_count, start_at))
            first += share
        results = await asyncio.gather(*(loop.run_in_executor(None, pipe.recv) for _, pipe in self.children))
        errors = [result[1] for result in results if result[0] == "error"]
        if errors:
            raise RuntimeError("a worker process failed:\n" + errors[0])
        return merge([result[1] for result in results]), max(result[2] for result in results)

    async def close(self) -> None:
        for process, pipe in self.children:
            try:
                pipe.send(None)
            except OSError:
                pass
        for process, _ in self.children:
            await asyncio.get_running_loop().run_in_executor(None, process.join, 30)
            if process.is_alive():
                process.terminate()
        await self.engine.dispose()


def cpu_per_pair(cpu: dict, pairs: int) -> dict[str, float | None]:
    """CPU per pair, in ms: the bench's process(es) (the ingress's cost of the ledger), and PostgreSQL's."""
    if not pairs:
        return {"bench_cpu_ms_per_pair": None, "postgres_cpu_ms_per_pair": None}
    return {"bench_cpu_ms_per_pair": round(cpu["bench_cpu_s"] * 1000 / pairs, 3),
            "postgres_cpu_ms_per_pair": round(cpu["postgres_cpu_s"] * 1000 / pairs, 3)}


def ledger_figures(tally: Tally, wall: float, cpu: dict) -> dict[str, Any]:
    before = None  # pairs/s while the allowance lasted
    if tally.first_shortfall_s:
        done = sum(end <= tally.first_shortfall_s for end in tally.pair_end_s)
        before = round(done / tally.first_shortfall_s, 1)
    return {
        "pairs": tally.window_pairs, "shortfalls": tally.window_shortfalls, "lowered": tally.lowered,
        "seconds": round(wall, 3), "pairs_per_s": round(tally.window_pairs / wall, 1),
        "attempts_per_s": round((tally.window_pairs + tally.window_shortfalls) / wall, 1),
        "first_shortfall_s": None if tally.first_shortfall_s is None else round(tally.first_shortfall_s, 3),
        "pairs_per_s_before_first_shortfall": before,
        "p50_hold_ms": ms(percentile(tally.hold_s, 0.5)), "p90_hold_ms": ms(percentile(tally.hold_s, 0.9)),
        "p99_hold_ms": ms(percentile(tally.hold_s, 0.99)),
        "p50_settle_ms": ms(percentile(tally.settle_s, 0.5)), "p90_settle_ms": ms(percentile(tally.settle_s, 0.9)),
        "p99_settle_ms": ms(percentile(tally.settle_s, 0.99)),
        "p50_shortfall_ms": ms(percentile(tally.shortfall_s, 0.5)) if tally.shortfall_s else None,
        "cpu": cpu, **cpu_per_pair(cpu, tally.window_pairs),
    }


class OverspendMonitor:
    """Samples every MonthlyUsage against its User's allowance while a phase runs."""

    def __init__(self, dsn: str) -> None:
        self.dsn, self.samples, self.worst = dsn, 0, None  # worst: max(used - allowance)

    async def __aenter__(self) -> "OverspendMonitor":
        self.conn = await asyncpg.connect(self.dsn)
        self.task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def _run(self) -> None:
        query = ("SELECT max(m.used - coalesce(u.monthly_allowance, $1)) FROM monthly_usage m "
                 "JOIN users u ON u.id = m.user_id")
        while True:
            worst = await self.conn.fetchval(query, DEFAULT_MONTHLY_ALLOWANCE)
            self.samples += 1
            if worst is not None and (self.worst is None or worst > self.worst):
                self.worst = worst
            await asyncio.sleep(MONITOR_EVERY_S)

    async def __aexit__(self, *exc: Any) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.conn.close()


async def overspend_check(dsn: str, seen_used: dict[uuid.UUID, int],
                          seen_settled: dict[uuid.UUID, int]) -> dict[str, Any]:
    """Every User's counters against its Holds; returns the problems found (none: ok)."""
    conn = await asyncpg.connect(dsn)
    problems: list[str] = []
    try:
        users = {r["id"]: r["monthly_allowance"] for r in await conn.fetch("SELECT id, monthly_allowance FROM users")}
        months = {(r["user_id"], r["month"]): r["used"] for r in await conn.fetch("SELECT * FROM monthly_usage")}
        budgets = await conn.fetch("SELECT user_id, key_id, tokens FROM budgets")
        grants = {(r["user_id"], r["key_id"]): r["tokens"] for r in await conn.fetch(
            "SELECT user_id, key_id, sum(tokens) AS tokens FROM grants GROUP BY user_id, key_id")}
        holds = await conn.fetch(
            "SELECT user_id, month, pays_from, state, count(*) AS n, sum(tokens) AS tokens, sum(used) AS used, "
            "min(tokens) AS min_tokens, min(used) AS min_used FROM holds GROUP BY user_id, month, pays_from, state")
        open_holds = await conn.fetchval("SELECT count(*) FROM holds WHERE state = 'held'")
        key_budget_holds = await conn.fetchval("SELECT count(*) FROM holds WHERE key_budget")
    finally:
        await conn.close()

    if open_holds:
        problems.append(f"{open_holds} Holds left held")
    if key_budget_holds:
        problems.append(f"{key_budget_holds} Holds paid by a key's Budget (none was granted)")
    allowance_paid: dict[tuple[uuid.UUID, str], int] = {}
    budget_paid: dict[uuid.UUID, int] = {}
    db_used: dict[uuid.UUID, int] = {}
    db_settled: dict[uuid.UUID, int] = {}
    for r in holds:
        if r["min_tokens"] <= 0 or r["min_used"] < 0:
            problems.append(f"user {r['user_id']}: a Hold with tokens {r['min_tokens']} / used {r['min_used']}")
        charge = {"settled": r["used"], "held": r["tokens"], "released": 0}[r["state"]]
        if r["pays_from"] == "allowance":
            key = (r["user_id"], r["month"])
            allowance_paid[key] = allowance_paid.get(key, 0) + charge
        else:
            budget_paid[r["user_id"]] = budget_paid.get(r["user_id"], 0) + charge
        if r["state"] == "settled":
            db_used[r["user_id"]] = db_used.get(r["user_id"], 0) + r["used"]
            db_settled[r["user_id"]] = db_settled.get(r["user_id"], 0) + r["n"]
    for (user_id, month), used in months.items():
        allowance = users[user_id]
        allowance = DEFAULT_MONTHLY_ALLOWANCE if allowance is None else allowance
        paid = allowance_paid.pop((user_id, month), 0)
        if used < 0:
            problems.append(f"user {user_id} {month}: MonthlyUsage {used} < 0")
        if used != paid:
            problems.append(f"user {user_id} {month}: MonthlyUsage {used} != Holds' {paid}")
        if used > allowance:
            problems.append(f"user {user_id} {month}: MonthlyUsage {used} > allowance {allowance}")
    for (user_id, month), paid in allowance_paid.items():
        if paid:
            problems.append(f"user {user_id} {month}: Holds took {paid} from the allowance, no MonthlyUsage row")
    own_budgets = {}
    for r in budgets:
        if r["tokens"] < 0:
            problems.append(f"user {r['user_id']}: Budget {r['tokens']} < 0")
        if r["key_id"] is None:
            own_budgets[r["user_id"]] = r["tokens"]
    for user_id in users:
        expected = grants.get((user_id, None), 0) - budget_paid.get(user_id, 0)
        if own_budgets.get(user_id, 0) != expected:
            problems.append(f"user {user_id}: Budget {own_budgets.get(user_id, 0)} != Grants less Holds {expected}")
    for user_id in set(seen_used) | set(db_used):
        if seen_used.get(user_id, 0) != db_used.get(user_id, 0) or \
                seen_settled.get(user_id, 0) != db_settled.get(user_id, 0):
            problems.append(f"user {user_id}: workers settled {seen_settled.get(user_id, 0)} Holds / "
                            f"{seen_used.get(user_id, 0)} tokens, the database {db_settled.get(user_id, 0)} / "
                            f"{db_used.get(user_id, 0)}")
    return {"ok": not problems, "problems": problems, "users": len(users), "month_rows": len(months),
            "holds": sum(r["n"] for r in holds), "settled": sum(db_settled.values()),
            "tokens_settled": sum(db_used.values())}


# -- the run ---------------------------------------------------------------------
def cpu_text(cpu: dict) -> str:
    line = (f"cpu: bench {cpu['bench_cores']:.2f} postgres {cpu['postgres_cores']:.2f} "
            f"other {cpu['other_cores']:.2f} cores")
    if cpu["steal_cores"] >= 0.05:
        line += f" (steal {cpu['steal_cores']:.2f})"
    if cpu["other_share"] > OTHER_CPU_WARN:
        line += f"  WARNING: other processes used {cpu['other_share']:.0%} of the machine"
    return line


def pair_cpu_text(figures: dict) -> str:
    if figures["bench_cpu_ms_per_pair"] is None:
        return "no pairs"
    return (f"per pair: bench {figures['bench_cpu_ms_per_pair']:.2f} ms CPU, "
            f"postgres {figures['postgres_cpu_ms_per_pair']:.2f} ms")


BASELINE_LABELS = {"asyncpg_rows": "baseline asyncpg, row per worker:",
                   "asyncpg_one_row": "baseline asyncpg, one row:",
                   "sqlalchemy_rows": "baseline SQLAlchemy session, row per worker:"}


async def run_baselines(args: argparse.Namespace, dsn: str, url: str, with_plumbing: bool) -> dict[str, Any]:
    """The raw loops of one round. The SQLAlchemy loop only says what the plumbing costs, so it
    runs in the first round only: no ratio is taken against it."""
    duration, n = (None if args.count else args.duration), args.concurrency
    base = {"asyncpg_rows": await baseline_asyncpg(dsn, n, False, duration, args.count, args.warmup),
            "asyncpg_one_row": await baseline_asyncpg(dsn, n, True, duration, args.count, args.warmup)}
    if with_plumbing:
        base["sqlalchemy_rows"] = await baseline_sqlalchemy(url, n, duration, args.count, args.warmup)
    for name, figures in base.items():
        print(f"{BASELINE_LABELS[name]:<45}{figures['pairs_per_s']:>7.0f} pairs/s ({figures['pairs']} pairs)  "
              f"p50 pair {figures['p50_pair_ms']} ms  {cpu_text(figures['cpu'])}; "
              f"{pair_cpu_text(figures)}", flush=True)
    return base


@dataclass
class Seen:
    """What the workers saw, over every phase, for the overspend check."""

    used: dict[uuid.UUID, int] = field(default_factory=dict)
    settled: dict[uuid.UUID, int] = field(default_factory=dict)
    worst: list[int] = field(default_factory=list)
    samples: int = 0

    def remember(self, tally: Tally) -> None:
        for user_id, used in tally.used.items():
            self.used[user_id] = self.used.get(user_id, 0) + used
        for user_id, settled in tally.settled.items():
            self.settled[user_id] = self.settled.get(user_id, 0) + settled


async def run_mode(args: argparse.Namespace, runner: "LedgerRunner", dsn: str, mode: str, label: str,
                   seen: Seen) -> dict[str, Any]:
    """One mode's warm-up and timed phase on Users of its own (`label` keeps each round's apart)."""
    n, duration = args.concurrency, (None if args.count else args.duration)
    if mode == "separate":
        users = [await new_user(runner.sessions, f"bench-separate-{label}{w}", BIG_ALLOWANCE) for w in range(n)]
        asks = [sky(*users[w]) for w in range(n)]
        if args.warmup > 0:
            tally, _ = await runner.phase(asks, args.warmup, None)
            seen.remember(tally)
        allowance = BIG_ALLOWANCE
    else:
        warm_user = await new_user(runner.sessions, f"bench-one-warmup{label}", BIG_ALLOWANCE)
        expected = args.count
        if args.warmup > 0:
            tally, wall = await runner.phase([sky(*warm_user)] * n, args.warmup, None)
            seen.remember(tally)
            if expected is None:
                expected = int(tally.window_pairs / wall * args.duration)
        if expected is None:
            expected = 100 * n  # no warm-up to go by
        allowance = args.shared_allowance or max(HOLD_TOKENS, int(SHARED_FILL * expected * HOLD_TOKENS))
        shared = await new_user(runner.sessions, f"bench-one{label}", allowance)
        asks = [sky(*shared)] * n
    async with OverspendMonitor(dsn) as monitor:
        (tally, wall), cpu = await measured(runner.phase(asks, duration, args.count), runner.child_pids)
    seen.remember(tally)
    seen.worst.append(monitor.worst if monitor.worst is not None else 0)
    seen.samples += monitor.samples
    figures = ledger_figures(tally, wall, cpu)
    figures["users"] = n if mode == "separate" else 1
    figures["allowance"] = allowance
    print(mode_text(mode, figures), flush=True)
    print(f"{'':<16}{cpu_text(cpu)}; {pair_cpu_text(figures)}", flush=True)
    return figures


def mode_text(mode: str, figures: dict[str, Any]) -> str:
    label = "separate users:" if mode == "separate" else "one user:"
    line = (f"{label:<16}{figures['pairs_per_s']:>7.0f} pairs/s ({figures['pairs']} pairs, "
            f"{figures['shortfalls']} shortfalls")
    if mode == "one":
        line += f", {figures['lowered']} lowered; allowance {figures['allowance']}"
        if figures["first_shortfall_s"] is not None:
            line += (f", first shortfall at {figures['first_shortfall_s']:.1f} s, "
                     f"{figures['pairs_per_s_before_first_shortfall']:.0f} pairs/s until then")
    line += (f")  p50 hold {figures['p50_hold_ms']} ms  p50 settle {figures['p50_settle_ms']} ms  "
             f"p99 hold {figures['p99_hold_ms']} ms  p99 settle {figures['p99_settle_ms']} ms")
    if figures["p50_shortfall_ms"] is not None:
        line += f"  p50 shortfall {figures['p50_shortfall_ms']} ms"
    return line


def round_ratios(baseline: dict[str, Any], ledger: dict[str, Any],
                 plumbing: dict[str, Any] | None) -> dict[str, float | None]:
    """The ledger's rates over the raw loops' of the same round (and the SQLAlchemy loop's, when it ran)."""
    def share(rate: float, of: dict[str, Any] | None) -> float | None:
        return round(rate / of["pairs_per_s"], 3) if of and of["pairs_per_s"] else None

    ratios: dict[str, float | None] = {}
    if "separate" in ledger:
        rate = ledger["separate"]["pairs_per_s"]
        ratios["separate_vs_raw"] = share(rate, baseline["asyncpg_rows"])
        if plumbing is not None:
            ratios["separate_vs_sqlalchemy"] = share(rate, plumbing)
    if "one" in ledger:
        ratios["one_vs_raw_one_row"] = share(ledger["one"]["pairs_per_s"], baseline["asyncpg_one_row"])
    return ratios


def median_ratios(rounds: list[dict[str, float | None]]) -> dict[str, float | None]:
    """Each ratio's median over the rounds: a ratio is only ever taken within one round, so a
    machine whose speed drifts between rounds (the hypervisor's steal) moves both sides alike."""
    names = {name for ratios in rounds for name in ratios}
    medians: dict[str, float | None] = {}
    for name in sorted(names):
        values = sorted(r[name] for r in rounds if r.get(name) is not None)
        if not values:
            medians[name] = None
            continue
        middle = len(values) // 2
        medians[name] = round(values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2, 3)
    return medians


def ratios_text(ratios: dict[str, float | None]) -> str:
    parts = []
    if ratios.get("separate_vs_raw") is not None:
        part = f"separate users {ratios['separate_vs_raw']:.3f} of the raw rate"
        if ratios.get("separate_vs_sqlalchemy") is not None:
            part += f" ({ratios['separate_vs_sqlalchemy']:.2f} of the SQLAlchemy loop)"
        parts.append(part)
    if ratios.get("one_vs_raw_one_row") is not None:
        parts.append(f"one user {ratios['one_vs_raw_one_row']:.3f} of the one-row raw rate")
    return "; ".join(parts)


def overspend_text(check: dict[str, Any], with_one_user: bool) -> str:
    if not check["ok"]:
        return "\n".join([f"overspend check: FAILED ({len(check['problems'])} problems)"]
                         + [f"  {problem}" for problem in check["problems"][:20]])
    closest = ""
    if with_one_user:
        closest = f", the one user's closest {-check['worst_used_minus_allowance_seen']} tokens under"
    return (f"overspend check: ok ({check['users']} users, {check['holds']} Holds, {check['settled']} settled, "
            f"{check['tokens_settled']} tokens: every MonthlyUsage = its Holds, none over its allowance "
            f"({check['samples']} samples during the runs{closest}), none below 0, none left held, "
            f"the workers' totals match)")


async def main_async(args: argparse.Namespace) -> int:
    dsn = await recreate_database(args.admin_dsn, args.database)
    url = dsn.replace("postgresql://", "postgresql+asyncpg://", 1)
    await upgrade(url)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE TABLE bench_counter (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0)")
        await conn.execute("INSERT INTO bench_counter (id) SELECT generate_series(0, $1 - 1)", args.concurrency)
    finally:
        await conn.close()

    duration = None if args.count else args.duration
    n = args.concurrency
    report: dict[str, Any] = {
        "settings": {"concurrency": n, "duration_s": duration, "count": args.count, "warmup_s": args.warmup,
                     "modes": args.modes, "processes": args.processes, "path": args.path, "database": args.database,
                     "rounds": args.rounds, "cpus": os.cpu_count()},
        "rounds": [],
    }
    span = f"duration={duration}s" if duration is not None else f"count={args.count}"
    where = dsn.rsplit("@", 1)[-1].rsplit("/", 1)[0]
    print(f"ledger: concurrency={n} {span} warmup={args.warmup}s processes={args.processes} path={args.path} "
          f"rounds={args.rounds} backend=postgresql ({where}, {os.cpu_count()} CPUs)", flush=True)

    runner = LedgerRunner(url, n, args.processes, args.path)
    await runner.start()
    seen = Seen()
    try:
        for number in range(args.rounds):
            if args.rounds > 1:
                print(f"-- round {number + 1} of {args.rounds}", flush=True)
            one_round: dict[str, Any] = {"baseline": {}, "ledger": {}}
            if not args.no_baseline:
                one_round["baseline"] = await run_baselines(args, dsn, url, with_plumbing=number == 0)
            label = "" if args.rounds == 1 else f"r{number + 1}-"
            for mode in args.modes:
                one_round["ledger"][mode] = await run_mode(args, runner, dsn, mode, label, seen)
            if one_round["baseline"]:
                one_round["ratios"] = round_ratios(one_round["baseline"], one_round["ledger"],
                                                   one_round["baseline"].get("sqlalchemy_rows"))
                print("ratio: " + ratios_text(one_round["ratios"]), flush=True)
            report["rounds"].append(one_round)
    finally:
        await runner.close()

    # The first round's figures stand at the top, as a run of one round writes them.
    report["baseline"], report["ledger"] = report["rounds"][0]["baseline"], report["rounds"][0]["ledger"]
    if not args.no_baseline:
        report["ratios"] = median_ratios([r["ratios"] for r in report["rounds"]])
        if args.rounds > 1:
            print(f"ratio, median of {args.rounds} rounds (each round's ledger over its own raw loops): "
                  + ratios_text(report["ratios"]), flush=True)

    check = await overspend_check(dsn, seen.used, seen.settled)
    check["worst_used_minus_allowance_seen"] = max(seen.worst) if seen.worst else None
    check["samples"] = seen.samples
    if seen.worst and max(seen.worst) > 0:
        check["ok"] = False
        check["problems"].append(f"a MonthlyUsage was {max(seen.worst)} over its allowance during the run")
    report["overspend_check"] = check
    print(overspend_text(check, "one" in args.modes), flush=True)

    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str) + "\n")
    if not args.keep_database:
        await drop_database(args.admin_dsn, args.database)
    return 0 if check["ok"] else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=32, help="workers, and the pool size (default 32)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per timed phase (default 10)")
    parser.add_argument("--count", type=int, default=None,
                        help="instead of --duration: this many iterations per phase (Hold attempts for the ledger)")
    parser.add_argument("--warmup", type=float, default=2.0, help="untimed seconds before each phase (default 2)")
    parser.add_argument("--modes", default="separate,one",
                        type=lambda s: [m for m in s.split(",") if m],
                        help="ledger modes, of separate,one (default both)")
    parser.add_argument("--shared-allowance", type=int, default=None,
                        help="the one User's allowance (default: half the pairs its warm-up predicts x 54)")
    parser.add_argument("--processes", type=int, default=1,
                        help="split the ledger's workers over this many processes (default 1: all in this one)")
    parser.add_argument("--path", choices=("hot", "session"), default="hot",
                        help="hot: take_hold_on / end_hold_on on the engine, as the API (default); "
                             "session: take_hold / end_hold in a session each")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat the baselines and the ledger's modes this many times, one after the other, "
                             "and give the median of each round's ratios (default 1)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the SELECT 1 / UPDATE baseline")
    parser.add_argument("--admin-dsn", default=ADMIN_DSN,
                        help="asyncpg DSN of a database to connect to while making ours (ACS_TEST_PG_ADMIN_URL)")
    parser.add_argument("--database", default=DATABASE, help=f"the database to (re)create (default {DATABASE})")
    parser.add_argument("--keep-database", action="store_true", help="leave the database for a look afterwards")
    parser.add_argument("--json", default=None, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if any(m not in ("separate", "one") for m in args.modes):
        parser.error("--modes takes separate and/or one")
    if args.concurrency < 1 or args.rounds < 1:
        parser.error("--concurrency and --rounds must be 1 or more")
    if not 1 <= args.processes <= args.concurrency:
        parser.error("--processes must be between 1 and --concurrency")
    return args


def main() -> None:
    sys.exit(asyncio.run(main_async(parse_args())))


if __name__ == "__main__":
    main()
