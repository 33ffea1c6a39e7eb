"""What the chaos soak (bench/chaos.py) needs of the rehearsal cluster: its addresses, a probe of
each fault kind, and the three faults that are not a process's kill -9 done here (a worker node
started again, PostgreSQL's backends terminated, Redis's clients killed)."""
from __future__ import annotations

import asyncio
import shlex
import time
from dataclasses import dataclass
from typing import Any

from bench.chaos_faults import Fault, Probe
from bench.chaos_traffic import Account, Traffic

@dataclass
class ClusterFacts:
    base_url: str  # the API, ending before /v1
    database_url: str  # the ledger (SQLAlchemy)
    redis_url: str  # the platform's Redis, with its db index
    admin_dsn: str  # a PostgreSQL connection that may terminate the platform's backends
    layout: Any  # cluster/rehearsal.py's Layout


def cluster_facts(args: Any) -> ClusterFacts:
    """The rehearsal's addresses (cluster/rehearsal.py's Layout, from the ACS_REHEARSAL_* variables),
    unless the options name others."""
    from cluster.rehearsal import Layout

    layout = Layout.from_env()
    return ClusterFacts((args.base_url or layout.root).rstrip("/").removesuffix("/v1"),
                        args.database_url or layout.database_url, args.redis_url or layout.redis_url,
                        layout.pg_admin_dsn, layout)


async def processes(facts: ClusterFacts) -> dict[str, list[dict[str, Any]]]:
    """cluster/rehearsal.py's processes(), off the event loop (it asks Ray's state API)."""
    from cluster.rehearsal import processes as rehearsal_processes

    return await asyncio.to_thread(rehearsal_processes, facts.layout)


def _database_name(url: str) -> str:
    return url.rsplit("/", 1)[1].split("?", 1)[0]


async def pg_kill(facts: ClusterFacts) -> int:
    """pg_terminate_backend of every connection to the platform's database but this one."""
    import asyncpg

    connection = await asyncpg.connect(facts.admin_dsn.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        rows = await connection.fetch(
            "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()", _database_name(facts.database_url))
    finally:
        await connection.close()
    return sum(1 for row in rows if row["ended"])


async def redis_kill(facts: ClusterFacts) -> int:
    """CLIENT KILL of every connection on the platform's db index (bench/chaos_faults.py says
    why not a restart of the machine's shared server), this one aside."""
    import redis.asyncio as redis

    client = redis.Redis.from_url(facts.redis_url)
    try:
        db = int(client.connection_pool.connection_kwargs.get("db") or 0)
        me = int(await client.client_id())
        killed = 0
        for entry in await client.client_list():
            if str(entry.get("db")) == str(db) and str(entry.get("id")) != str(me):
                killed += 1 if await client.execute_command("CLIENT", "KILL", "ID", str(entry["id"])) else 0
        return killed
    finally:
        await client.aclose()


async def restart_node(facts: ClusterFacts, name: str, tries: int = 20) -> None:
    """`ray start --address` of the worker node `name` again, as the rehearsal started it. Its ports may
    still be held for a moment by the killed raylet's agents, so it tries again."""
    from cluster.rehearsal import environment, worker_start_command

    layout = facts.layout
    command = worker_start_command(layout, next(n for n in layout.nodes if n.name == name))
    output = b""
    for _ in range(tries):
        process = await asyncio.create_subprocess_exec(*command, env=environment(layout), stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.STDOUT)
        output, _ = await process.communicate()
        if process.returncode == 0:
            return
        await asyncio.sleep(3)
    raise RuntimeError(f"{shlex.join(command)}: {output.decode(errors='replace')[-500:]}")


def probes(traffic: Traffic, account: Account) -> dict[str, Probe]:
    """For each fault kind, a request that succeeds once the kind has recovered."""
    key = {"Authorization": f"Bearer {account.key}"}
    http = traffic.http

    async def models(fault: Fault) -> bool:
        del fault
        return (await http.get("/v1/models", headers=key)).status_code == 200

    async def completion(fault: Fault) -> bool:
        wanted = [m for m in traffic.models if m.id in fault.target] or traffic.models
        answers = [await http.post("/v1/completions", headers=key,
                                   json={"model": m.id, "prompt": "The sky is", "max_tokens": 1}) for m in wanted]
        return all(answer.status_code == 200 for answer in answers)

    async def runner(fault: Fault) -> bool:
        """The Runner polled its queue after the kill (GET /health's runners)."""
        answer = await http.get("/health")  # 503 while a model is down: the runners are in it all the same
        if "application/json" not in answer.headers.get("content-type", "") or "wrapper" not in answer.json():
            return False
        since = time.monotonic() - (traffic.start + fault.at_s)
        return any(r["seconds_since_poll"] is not None and r["seconds_since_poll"] < since
                   for r in answer.json()["wrapper"]["runners"])

    following: dict[int, str] = {}  # a fault's probe harvest, followed across failed reads

    async def harvest(fault: Fault) -> bool:
        """A one-prompt harvest that ends `done`. One harvest a fault, followed until it ends: an
        error while reading it (a 503 of a ledger cut, the proxy's 500 of a killed ingress) does not
        make a second one, which the key's harvests at once (429) would refuse until the first ends;
        a new one only after it failed."""
        job = following.get(id(fault))
        if job is None:
            made = await http.post("/v1/harvest", headers=key,
                                   json={"model": traffic.harvest_model, "prompts": ["probe"], "layers": [0]})
            if made.status_code != 202:
                return False
            job = following[id(fault)] = made.json()["job_id"]
        while True:
            answer = await http.get(f"/v1/harvest/{job}", params={"wait": 5}, headers=key)
            status = answer.json().get("status") if answer.status_code == 200 else None
            if status in ("done", "failed", "cancelled"):
                del following[id(fault)]
                return status == "done"
            if status is None:
                return False  # read again at the next try
            await asyncio.sleep(0.2)

    async def raylet(fault: Fault) -> bool:
        return await (harvest(fault) if "harvest" in fault.target else completion(fault))

    async def any_request(fault: Fault) -> bool:
        """A Completion on the default model (the first listed): the ledger and Redis answer again.
        Not on every model: one scaled to zero would count its cold start as the fault's time."""
        del fault
        answer = await http.post("/v1/completions", headers=key,
                                 json={"model": traffic.models[0].id, "prompt": "The sky is", "max_tokens": 1})
        return answer.status_code == 200

    return {"ingress": models, "model": completion, "runner": runner, "harvest": harvest, "raylet": raylet,
            "postgres": any_request, "redis": any_request}
