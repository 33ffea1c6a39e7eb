"""Issue 38's chaos soak: mixed traffic on the rehearsal cluster while faults land at random.

    python bench/chaos.py --minutes 10 --kills 50 [--seed N] [--out chaos.json]

Users with keys and Budgets near their ends (one signed in to the App) send streamed and plain
Completions with and without Activations and Steering, Jobs, small harvests, Loom Branches and
Playground Runs (bench/chaos_traffic.py). Meanwhile `--kills` faults land at moments drawn from
`--seed` (bench/chaos_plan.py's kill_schedule): kill -9 of an ingress replica, a model replica,
the Runner, the harvest model host or a harvest run, a worker node's raylet (the node is started
again, as its supervisor would), pg_terminate_backend of the platform's PostgreSQL connections,
and the platform's Redis connections killed (bench/chaos_faults.py says why not a restart). Each
fault is timed until its kind is back and a probe of that kind succeeds.

After the soak: the traffic stops, the leases get their time, all work ends; then the ledger's
invariants (ledger/audit, the same as `python -m cluster.invariants`), and the client's checks:
each stream ended with [DONE], the error event or the connection's end; every error answer is the
spec's error object; every `done` harvest's files equal a rerun of its prompts. It prints the
figures and writes them as JSON (`--out`); exit 1 on any violation.

The cluster's addresses and processes come from cluster/rehearsal.py (its Layout and processes()).
Start the cluster first (`bash cluster/rehearse.sh`), run this under `flock /tmp/acs-heavy.lock`,
then `bash cluster/rehearse.sh down`.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.chaos_checks import compare_harvests, wait_for_work  # noqa: E402
from bench.chaos_cluster import ClusterFacts, cluster_facts, pg_kill, probes, processes, redis_kill, restart_node  # noqa: E402
from bench.chaos_faults import Faults  # noqa: E402
from bench.chaos_plan import FAULT_KINDS, Kill, kill_schedule, recovery_figures  # noqa: E402
from bench.chaos_traffic import KINDS, ModelFacts, Traffic, drive, make_accounts, sign_in  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=10.0, help="how long the traffic and the faults last")
    p.add_argument("--kills", type=int, default=50, help="faults in all, spread over the kinds")
    p.add_argument("--seed", type=int, default=38)
    p.add_argument("--kinds", default=",".join(FAULT_KINDS), help="the fault kinds, separated by commas")
    p.add_argument("--users", type=int, default=5)
    p.add_argument("--near-end", type=int, default=2, help="Users whose Budget the soak spends to its end")
    p.add_argument("--concurrency", type=int, default=6, help="clients sending requests at once")
    p.add_argument("--recover-within", type=float, default=300.0, help="seconds a kind has to recover")
    p.add_argument("--settle-within", type=float, default=900.0, help="seconds the work has to end after the soak")
    p.add_argument("--base-url", help="the API (default: the rehearsal's)")
    p.add_argument("--database-url", help="the ledger (default: the rehearsal's, or ACS_DATABASE_URL)")
    p.add_argument("--redis-url", help="the platform's Redis (default: the rehearsal's, or ACS_REDIS_URL)")
    p.add_argument("--out", type=Path, help="also write the figures here as JSON")
    return p.parse_args(argv)


async def model_facts(facts: ClusterFacts, key: str) -> tuple[list[ModelFacts], str]:
    """The served models and the one harvests use (the catalog's default)."""
    import httpx

    async with httpx.AsyncClient(base_url=facts.base_url, timeout=60, trust_env=False) as http:
        answer = await http.get("/v1/models", headers={"Authorization": f"Bearer {key}"})
        answer.raise_for_status()
    models = [ModelFacts(m["id"], m["capabilities"]["hidden_size"], m["capabilities"]["n_layers"],
                         bool(m["capabilities"]["activations"])) for m in answer.json()["data"]]
    default = next((m["id"] for m in answer.json()["data"] if m.get("default")), models[0].id)
    return models, default


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    facts = cluster_facts(args)
    rng = random.Random(args.seed)
    tag = f"{args.seed}-{int(time.time())}"
    # The last User is the probes' and the App's: the traffic's requests never wait behind a probe's key.
    accounts = await make_accounts(facts.database_url, args.users + 1, args.near_end, tag)
    prober = accounts[-1]
    app = await sign_in(facts.base_url, prober)
    models, harvest_model = await model_facts(facts, prober.key)
    duration = args.minutes * 60
    schedule = kill_schedule(args.seed, duration, args.kills, args.kinds.split(","))
    print(f"[chaos] {len(accounts) - 1} users and a prober, models {[m.id for m in models]}, harvests on {harvest_model}; "
          f"{len(schedule)} faults over {duration:.0f} s (seed {args.seed})", flush=True)

    start = time.monotonic()
    traffic = Traffic(facts.base_url, accounts[:-1], app, models, harvest_model, random.Random(args.seed + 1), start)
    faults = Faults(random.Random(args.seed + 2), start, lambda: processes(facts), probes(traffic, prober),
                    lambda node: restart_node(facts, node), lambda: pg_kill(facts), lambda: redis_kill(facts),
                    args.recover_within)

    async def fault_at(kill: Kill) -> None:
        await asyncio.sleep(max(0.0, start + kill.at_s - time.monotonic()))
        fault = await faults.do(kill.kind)
        print(f"[chaos] {fault.at_s:7.1f} s {fault.kind:8} {fault.target[:70]}: "
              f"{'recovered in %.1f s' % fault.recovered_s if fault.recovered_s is not None else 'NOT recovered' if fault.done else 'skipped'}",
              flush=True)

    fault_tasks = [asyncio.create_task(fault_at(kill)) for kill in schedule]
    await drive(traffic, start + duration, args.concurrency)
    print(f"[chaos] traffic stopped after {time.monotonic() - start:.0f} s: {len(traffic.records)} requests; "
          "waiting for the faults' recoveries", flush=True)
    await asyncio.gather(*fault_tasks)

    from domain.settings import get_settings

    lease_s = max(get_settings().runner_lease_s, get_settings().hold_lease_s)
    print(f"[chaos] the leases' time ({lease_s:.0f} s), then every piece of work to its end", flush=True)
    await asyncio.sleep(lease_s)
    work = await wait_for_work(traffic, args.settle_within)
    harvests = await compare_harvests(traffic, accounts, args.settle_within)
    violations = await invariants(facts)
    await traffic.aclose()
    await app.aclose()
    return figures(args, facts, traffic, faults, work, harvests, violations, time.monotonic() - start)


async def invariants(facts: ClusterFacts) -> list[Any]:
    """The ledger's invariants, as `python -m cluster.invariants` checks them."""
    from domain.settings import get_settings
    from ledger.audit import find_violations
    from ledger.store.db import make_engine, session_factory

    engine = make_engine(facts.database_url)
    try:
        return await find_violations(session_factory(engine), default_allowance=get_settings().monthly_allowance)
    finally:
        await engine.dispose()


def figures(args: argparse.Namespace, facts: ClusterFacts, traffic: Traffic, faults: Faults,
            work: dict[str, Any], harvests: dict[str, Any], violations: list[Any], took_s: float) -> dict[str, Any]:
    from cluster.invariants import report

    sent: dict[str, dict[str, int]] = {}
    for record in traffic.records:
        by_status = sent.setdefault(record.kind, {})
        status = str(record.status) if record.status is not None else "no answer"
        if isinstance(record.error, dict) and record.error.get("code"):
            status += f" {record.error['code']}"  # which error: a 503 of a busy ledger or of a model away
        by_status[status] = by_status.get(status, 0) + 1
    streams: dict[str, int] = {}
    for record in traffic.records:
        if record.stream:
            streams[record.stream] = streams.get(record.stream, 0) + 1
    problems = [{"kind": r.kind, "at_s": r.started_s, "status": r.status, "problem": r.problem}
                for r in traffic.records if r.problem]
    recoveries: dict[str, list[float | None]] = {}
    for fault in faults.faults:
        if fault.done:
            recoveries.setdefault(fault.kind, []).append(fault.recovered_s)
    client_violations = len(problems) + harvests["differ"] + work["not_ended"]
    print(report(violations))
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": platform.node(),
        "cpus": os.cpu_count(), "seed": args.seed, "minutes": args.minutes, "kills_asked": args.kills,
        "took_s": round(took_s, 1), "base_url": facts.base_url,
        "requests": {"total": len(traffic.records), "by_kind_and_status": sent, "stream_ends": streams},
        "work_items": work,
        "kills": {kind: sum(1 for f in faults.faults if f.kind == kind and f.done) for kind in FAULT_KINDS},
        "kills_skipped": [{"kind": f.kind, "at_s": f.at_s, "why": f.target} for f in faults.faults if not f.done],
        "recovery": recovery_figures(recoveries),
        "faults": [vars(f) for f in faults.faults],
        "invariant_violations": len(violations),
        "invariants": [{"invariant": v.invariant.value, "subject": v.subject, "detail": v.detail} for v in violations],
        "client_violations": client_violations, "client_problems": problems[:50], "harvests": harvests,
        "mix": KINDS,
        # Every request: its kind, status, error object or transport error, a stream's end, the work
        # it made (the ids, never the API key).
        "records": [{**vars(r), "ids": {k: v for k, v in r.ids.items() if k != "key"}} for r in traffic.records],
    }


def print_figures(out: dict[str, Any]) -> None:
    print(f"\n== chaos soak, seed {out['seed']}, {out['minutes']} min, {out['took_s']} s in all ==")
    print(f"requests: {out['requests']['total']}")
    for kind, statuses in sorted(out["requests"]["by_kind_and_status"].items()):
        print(f"  {kind:40} {sum(statuses.values()):5}  {dict(sorted(statuses.items()))}")
    print(f"stream ends: {out['requests']['stream_ends']}")
    print(f"work items: {json.dumps(out['work_items'])}")
    print("kills (done) and recovery (s):")
    for kind in FAULT_KINDS:
        r = out["recovery"].get(kind, {})
        print(f"  {kind:9} {out['kills'][kind]:3}  recovered {r.get('recovered', 0)}  "
              f"p50 {r.get('p50_s')}  max {r.get('max_s')}")
    if out["kills_skipped"]:
        print(f"  skipped: {len(out['kills_skipped'])} ({', '.join(sorted({s['why'] for s in out['kills_skipped']}))})")
    h = out["harvests"]
    print(f"harvests done {h['done']}, rerun equal exactly {h['exact']}, within tolerance {h['close']}, "
          f"differ {h['differ']}, not compared {h['not_compared']}")
    print(f"invariant violations: {out['invariant_violations']}   client-side violations: {out['client_violations']}")
    for problem in out["client_problems"][:10]:
        print(f"  {problem}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = asyncio.run(soak(args))
    print_figures(out)
    if args.out:
        args.out.write_text(json.dumps(out, indent=2, default=str) + "\n")
    return 1 if out["invariant_violations"] or out["client_violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
