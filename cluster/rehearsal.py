"""The cluster rehearsal (`bash cluster/rehearse.sh`): the GPU cluster's shape on this one machine.

Three Ray nodes, laid out as `ray up cluster/ray-aws.yaml` lays out a head and GPU workers: the head
(resource `api`: the two ingress replicas and the Runner), a worker whose `models` resource only the
model replicas ask for, and a worker whose `harvest` resource only the harvest model hosts ask for
(configs/profiles/cluster.yaml). PostgreSQL and Redis are the machine's own (MACHINE.md); the
rehearsal has a database and a Redis db index of its own. Then `serve deploy` of
cluster/serve-rehearsal.yaml, through the head's dashboard, as an operator deploys serve-gpu.yaml.

    python -m cluster.rehearsal up | down | status | processes

Here is every port and path the rehearsal uses (each port can be moved with an environment
variable, `Layout.from_env`), and `processes()`, which finds the PID of each kind of process (the
ingress replicas, the model replicas, the Runner, the harvest model hosts, each node's raylet): the
e2e test (tests/cluster) and the chaos soak (bench/chaos.py) read them here.

What differs from a real cluster (README, "Try the cluster before paying for GPUs"):
- the three nodes share one IP address (127.0.0.1), one CPU and one memory, so each node has ports of
  its own where a real node would use Ray's defaults;
- Serve's proxy runs on the head alone (`proxy_location: HeadOnly`): three proxies on one address
  cannot each bind the API's port; a real cluster has one per node behind a load balancer;
- the "GPU" worker runs the models on its CPU, and the models are the test suite's tiny ones;
- PostgreSQL and Redis are on loopback without TLS or passwords; harvest files go to a local folder
  that every node reaches because all of them are this machine; the API is reached over plain http.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import socket
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
SERVE_CONFIG = REPO_ROOT / "cluster" / "serve-rehearsal.yaml"
APP_NAME = "acs"
PROFILE = "cluster"
# Every process of the rehearsal's Ray (nodes, workers, replicas, vLLM's engine cores) inherits this
# variable from `ray start`: `down` and `processes` find them by it, and no other Ray on the machine.
MARKER = "ACS_REHEARSAL_STATE"
STARTUP_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Node:
    """One Ray node of the rehearsal: its resources and its ports (a real node would use Ray's defaults)."""

    name: str
    num_cpus: int
    resources: dict[str, float]
    node_manager_port: int
    object_manager_port: int
    dashboard_agent_listen_port: int
    dashboard_agent_grpc_port: int
    metrics_export_port: int
    runtime_env_agent_port: int
    min_worker_port: int
    max_worker_port: int

    def port_args(self) -> list[str]:
        return [f"--node-manager-port={self.node_manager_port}",
                f"--object-manager-port={self.object_manager_port}",
                f"--dashboard-agent-listen-port={self.dashboard_agent_listen_port}",
                f"--dashboard-agent-grpc-port={self.dashboard_agent_grpc_port}",
                f"--metrics-export-port={self.metrics_export_port}",
                f"--runtime-env-agent-port={self.runtime_env_agent_port}",
                f"--min-worker-port={self.min_worker_port}", f"--max-worker-port={self.max_worker_port}"]


def _node(name: str, index: int, base: int, num_cpus: int, resources: dict[str, float]) -> Node:
    """Node `index`'s ports: six from base + 10*index, and 200 worker ports from base + 1000 + 200*index."""
    at = base + 10 * index
    workers = base + 1000 + 200 * index
    return Node(name, num_cpus, resources, at, at + 1, at + 2, at + 3, at + 4, at + 5, workers, workers + 199)


@dataclass(frozen=True)
class Layout:
    """The rehearsal's ports, database and folders. Each `ACS_REHEARSAL_*` variable moves one."""

    http_port: int = 8000
    gcs_port: int = 6380  # not Ray's 6379: the machine's Redis is there
    dashboard_port: int = 8265
    # Not in 10002-19999, Ray's default worker ports, which any other local Ray on the machine draws from.
    client_port: int = 27300
    port_base: int = 26400
    database: str = "acs_rehearsal"
    pg_admin_dsn: str = "postgresql://postgres@127.0.0.1:5432/postgres"
    redis_db: int = 7
    state_dir: Path = REPO_ROOT / "var" / "rehearsal"
    # Ray's own folder: short, as its socket paths must be (107 bytes), and apart from /tmp/ray, which
    # any other local Ray on this machine uses.
    ray_temp_dir: Path = Path("/tmp/acs-rehearsal-ray")
    nodes: tuple[Node, ...] = field(default=())

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Layout:
        env = dict(os.environ if env is None else env)

        def number(name: str, default: int) -> int:
            return int(env.get(f"ACS_REHEARSAL_{name}", default))

        base = number("PORT_BASE", cls.port_base)
        # The head's CPUs: the two ingress replicas, the Runner, Serve's controller and proxy; the
        # models' worker: two CPU models at 0.5 each; the harvest worker: a host and Ray Data's stages.
        nodes = (_node("head", 0, base, 2, {"api": 100}), _node("models", 1, base, 2, {"models": 100}),
                 _node("harvest", 2, base, 2, {"harvest": 100}))
        return cls(http_port=number("HTTP_PORT", cls.http_port), gcs_port=number("RAY_PORT", cls.gcs_port),
                   dashboard_port=number("DASHBOARD_PORT", cls.dashboard_port),
                   client_port=number("CLIENT_PORT", cls.client_port), port_base=base,
                   database=env.get("ACS_REHEARSAL_DATABASE", cls.database),
                   pg_admin_dsn=env.get("ACS_REHEARSAL_PG_ADMIN_URL", cls.pg_admin_dsn),
                   redis_db=number("REDIS_DB", cls.redis_db),
                   state_dir=Path(env.get("ACS_REHEARSAL_STATE_DIR", str(cls.state_dir))),
                   ray_temp_dir=Path(env.get("ACS_REHEARSAL_RAY_TEMP_DIR", str(cls.ray_temp_dir))), nodes=nodes)

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def gcs_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def root(self) -> str:
        """The API's address (without /v1)."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def database_url(self) -> str:
        return self.pg_admin_dsn.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1) + \
            f"/{self.database}"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:6379/{self.redis_db}"

    @property
    def harvest_storage(self) -> Path:
        return self.state_dir / "harvests"

    @property
    def secrets_file(self) -> Path:
        """Ray's token, the link secret and the metrics token of this rehearsal (0600)."""
        return self.state_dir / "secrets.json"

    @property
    def key_file(self) -> Path:
        return self.state_dir / "admin-api-key"

    @property
    def rendered_config(self) -> Path:
        return self.state_dir / "serve.yaml"


# -- the settings: what ~/acs.env holds on a real node (cluster/cluster.env.example) -------------

def rehearsal_secrets(layout: Layout) -> dict[str, str]:
    """This rehearsal's secrets, made on its first start and kept (0600) so that `status`, the tests
    and `down` reach the same Ray, and links signed before a restart still work."""
    from cluster.embedded import write_private

    if layout.secrets_file.exists():
        return json.loads(layout.secrets_file.read_text())
    made = {name: secrets.token_hex(32) for name in ("RAY_AUTH_TOKEN", "ACS_HARVEST_LINK_SECRET", "ACS_METRICS_TOKEN")}
    write_private(layout.secrets_file, json.dumps(made))
    return made


def node_environment(layout: Layout) -> dict[str, str]:
    """The environment `ray start` runs in on each node: cluster/serve.env, then the settings a real
    node reads from ~/acs.env, with the rehearsal's values, then Ray's token."""
    from cluster.ray_env import serve_environment

    made = rehearsal_secrets(layout)
    return {
        **serve_environment(),
        "RAY_USAGE_STATS_ENABLED": "0",
        "ACS_PROFILE": PROFILE,
        "ACS_ENVIRONMENT": "production",
        "ACS_DATABASE_URL": layout.database_url,
        "ACS_REDIS_URL": layout.redis_url,
        "ACS_HARVEST_LINK_SECRET": made["ACS_HARVEST_LINK_SECRET"],
        "ACS_METRICS_TOKEN": made["ACS_METRICS_TOKEN"],
        "ACS_HARVEST_STORAGE": str(layout.harvest_storage),
        "ACS_PUBLIC_BASE_URL": layout.root,
        "ACS_TRUSTED_PROXIES": "",
        "HF_TOKEN": "",
        # As cluster/ray-*.yaml: every Ray process demands the token, set after the settings.
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": made["RAY_AUTH_TOKEN"],
        MARKER: str(layout.state_dir),
    }


def environment(layout: Layout) -> dict[str, str]:
    """This process's environment with the nodes' settings: for `ray`, `serve` and the admin CLI."""
    return {**os.environ, **node_environment(layout)}


# -- up ----------------------------------------------------------------------------------------

def say(message: str) -> None:
    print(f"[rehearsal {time.strftime('%H:%M:%S')}] {message}", flush=True)


def prepare_ledger(layout: Layout) -> str:
    """Make the rehearsal's database if it is missing, migrate it (cluster/migrate.py's `upgrade`) and
    make the admin user `local` with its key as the embedded default does; the key (kept 0600)."""
    import asyncpg

    from cluster.embedded import prepare_ledger as embedded_ledger
    from domain.settings import Settings

    async def create() -> None:
        connection = await asyncpg.connect(layout.pg_admin_dsn, timeout=5)
        try:
            found = await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", layout.database)
            if not found:
                await connection.execute(f'CREATE DATABASE "{layout.database}"')
        finally:
            await connection.close()

    asyncio.run(create())
    settings = Settings(database_url=layout.database_url, environment="development")
    return asyncio.run(embedded_ledger(settings, layout.key_file))


def flush_redis(layout: Layout) -> None:
    """A fresh start of the rehearsal's own Redis db index: no line or bucket of an earlier run."""
    import redis

    client = redis.Redis.from_url(layout.redis_url)
    try:
        client.flushdb()
    finally:
        client.close()


def ray_bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _common_args(layout: Layout) -> list[str]:
    return ["--node-ip-address=127.0.0.1", f"--temp-dir={layout.ray_temp_dir}",
            f"--object-store-memory={128 * 1024 * 1024}", "--disable-usage-stats"]


def worker_start_command(layout: Layout, node: Node) -> list[str]:
    """`ray start --address` of a worker node: at the rehearsal's start, and again after its raylet died
    (bench/chaos.py restarts a node as a real node's supervisor would)."""
    return [ray_bin("ray"), "start", f"--address={layout.gcs_address}", *_common_args(layout), *node.port_args(),
            f"--num-cpus={node.num_cpus}", f"--resources={json.dumps(node.resources)}"]


def start_nodes(layout: Layout) -> None:
    env = environment(layout)
    head = layout.head
    say(f"ray start --head on 127.0.0.1:{layout.gcs_port} (resources {json.dumps(head.resources)})")
    subprocess.run([ray_bin("ray"), "start", "--head", f"--port={layout.gcs_port}", *_common_args(layout),
                    *head.port_args(), f"--num-cpus={head.num_cpus}", f"--resources={json.dumps(head.resources)}",
                    "--dashboard-host=127.0.0.1", f"--dashboard-port={layout.dashboard_port}",
                    f"--ray-client-server-port={layout.client_port}"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    for node in layout.nodes[1:]:
        say(f"ray start --address={layout.gcs_address}: node `{node.name}` (resources {json.dumps(node.resources)})")
        subprocess.run(worker_start_command(layout, node), env=env, check=True, stdout=subprocess.DEVNULL)


def render_config(layout: Layout) -> Path:
    """cluster/serve-rehearsal.yaml with the API's port of this layout."""
    import yaml

    config = yaml.safe_load(SERVE_CONFIG.read_text())
    config["http_options"]["port"] = layout.http_port
    layout.rendered_config.parent.mkdir(parents=True, exist_ok=True)
    layout.rendered_config.write_text(yaml.safe_dump(config, sort_keys=False))
    return layout.rendered_config


def serve_deploy(layout: Layout) -> None:
    path = render_config(layout)
    say(f"serve deploy {path} (cluster/serve-rehearsal.yaml on port {layout.http_port})")
    subprocess.run([ray_bin("serve"), "deploy", "-a", layout.dashboard_url, str(path)], env=environment(layout),
                   check=True, stdout=subprocess.DEVNULL)


def serve_status(layout: Layout) -> dict[str, Any]:
    """`serve status` of the rehearsal, as a mapping ({} when Serve does not answer)."""
    import yaml

    done = subprocess.run([ray_bin("serve"), "status", "-a", layout.dashboard_url], env=environment(layout),
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return {}
    return yaml.safe_load(done.stdout) or {}


def health(layout: Layout) -> tuple[int, dict[str, Any]] | None:
    try:
        with urllib.request.urlopen(f"{layout.root}/health", timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, {}
    except (OSError, ValueError):
        return None


def wait_until_serving(layout: Layout, timeout_s: float = STARTUP_TIMEOUT_S) -> float:
    """Wait for the application to run and GET /health to answer 200; the seconds waited."""
    started = time.monotonic()
    last = ""
    while True:
        status = serve_status(layout)
        app = (status.get("applications") or {}).get(APP_NAME) or {}
        deployments = {name: d.get("status") for name, d in (app.get("deployments") or {}).items()}
        answer = health(layout) if app.get("status") == "RUNNING" else None
        line = f"application {app.get('status', 'not deployed')}; deployments {deployments}; " \
               f"/health {answer[0] if answer else '-'}"
        if line != last:
            say(line)
            last = line
        if answer is not None and answer[0] == 200:
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"the rehearsal did not serve within {timeout_s:.0f} s: {line}")
        time.sleep(2)


def port_taken(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something listens on the port. Serve's proxy binds with SO_REUSEPORT, so a second Serve on a
    port in use starts without a word, and the kernel then splits the requests between the two proxies."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((host, port)) == 0


def up(layout: Layout) -> str:
    """Start the rehearsal; the admin key."""
    if own_pids(layout):
        raise SystemExit(f"The rehearsal runs already (processes marked {MARKER}={layout.state_dir}): "
                         "`bash cluster/rehearse.sh down` first.")
    if port_taken(layout.http_port):
        raise SystemExit(f"Port {layout.http_port} is in use by another process: stop it, or set "
                         "ACS_REHEARSAL_HTTP_PORT to a free port.")
    started = time.monotonic()
    layout.state_dir.mkdir(parents=True, exist_ok=True)
    layout.harvest_storage.mkdir(parents=True, exist_ok=True)
    say(f"ledger: {layout.database} on PostgreSQL; Redis db {layout.redis_db}")
    key = prepare_ledger(layout)
    flush_redis(layout)
    shutil.rmtree(layout.ray_temp_dir, ignore_errors=True)
    start_nodes(layout)
    serve_deploy(layout)
    wait_until_serving(layout)
    say(f"serving after {time.monotonic() - started:.0f} s")
    return key


# -- the processes -----------------------------------------------------------------------------

def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, _, value in pairs}


def _cmdline(pid: int) -> list[str]:
    try:
        return [part.decode(errors="replace") for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if part]
    except OSError:
        return []


def own_pids(layout: Layout) -> list[int]:
    """Every live process of this rehearsal: those that inherited its marker."""
    mine = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            if _environ(int(entry.name)).get(MARKER) == str(layout.state_dir):
                mine.append(int(entry.name))
    return sorted(mine)


def raylets(layout: Layout) -> dict[str, int]:
    """Each node's raylet PID, by node name (found by its node manager port)."""
    by_port = {f"--node_manager_port={node.node_manager_port}": node.name for node in layout.nodes}
    found = {}
    for pid in own_pids(layout):
        command = _cmdline(pid)
        if command and Path(command[0]).name == "raylet":
            for arg in command:
                if arg in by_port:
                    found[by_port[arg]] = pid
    return found


def state_api(layout: Layout, resource: str, **params: Any) -> list[dict[str, Any]]:
    """Ray's state API (`ray list <resource>`) over the head's dashboard, with the rehearsal's token in
    the request itself: this process's own Ray, if it has one, keeps its own token."""
    query = urllib.parse.urlencode({"limit": 10_000, "detail": "true", **params}, doseq=True)
    request = urllib.request.Request(f"{layout.dashboard_url}/api/v0/{resource}?{query}", headers={
        "Authorization": f"Bearer {rehearsal_secrets(layout)['RAY_AUTH_TOKEN']}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())["data"]["result"]["result"]


def _actors(layout: Layout) -> list[dict[str, Any]]:
    """The live actors, each with the name of the rehearsal's node it runs on."""
    nodes = {node["node_id"]: node for node in state_api(layout, "nodes")}
    alive = state_api(layout, "actors", filter_keys="state", filter_predicates="=", filter_values="ALIVE")
    actors = []
    for actor in alive:
        resources = (nodes.get(actor["node_id"]) or {}).get("resources_total") or {}
        node_name = next((n.name for n in layout.nodes if set(n.resources) & set(resources)), "?")
        name = actor.get("name") or ""
        # A Serve replica's id (SERVE_REPLICA::<app>#<deployment>#<id>): the `replica` label of /metrics
        # and the name of its log file.
        replica = name.rsplit("#", 1)[-1] if name.startswith("SERVE_REPLICA::") else ""
        actors.append({"class_name": actor["class_name"], "name": name, "pid": actor["pid"], "node": node_name,
                       "actor_id": actor["actor_id"], "replica": replica})
    return actors


def processes(layout: Layout | None = None) -> dict[str, list[dict[str, Any]]]:
    """The rehearsal's processes by kind: each with its `pid` and the `node` it runs on.

    Kinds: `ingress` (the ingress replicas), `model:<model id>` (each model's replicas), `runner`,
    `harvest_host:<model id>` (the harvest model hosts), `harvest_run` (harvests' run actors),
    `controller` and `proxy` (Serve's), `raylet:<node>` and `gcs` (Ray's)."""
    from deployments.boot import deployment_name
    from deployments.catalog import load_catalog
    from harvest.model_host import host_name

    layout = layout or Layout.from_env()
    catalog = load_catalog(PROFILE)
    replica_kinds = {f"ServeReplica:{APP_NAME}:ingress": "ingress", f"ServeReplica:{APP_NAME}:runner": "runner"}
    replica_kinds.update({f"ServeReplica:{APP_NAME}:{deployment_name(m)}": f"model:{m}" for m in catalog.models})
    host_kinds = {host_name(m): f"harvest_host:{m}" for m in catalog.models}
    found: dict[str, list[dict[str, Any]]] = {}
    for actor in _actors(layout):
        kind = replica_kinds.get(actor["class_name"]) or host_kinds.get(actor["name"])
        if kind is None and actor["name"].startswith("harvest-"):
            kind = "harvest_run"
        if kind is None and actor["class_name"] == "ServeController":
            kind = "controller"
        if kind is None and actor["class_name"] in ("ProxyActor", "HTTPProxyActor"):
            kind = "proxy"
        if kind is not None:
            found.setdefault(kind, []).append(actor)
    for node, pid in raylets(layout).items():
        found[f"raylet:{node}"] = [{"pid": pid, "node": node}]
    gcs = [pid for pid in own_pids(layout) if (_cmdline(pid) or [""])[0].endswith("gcs_server")]
    if gcs:
        found["gcs"] = [{"pid": pid, "node": "head"} for pid in gcs]
    return found


def ingress_replica_of(layout: Layout, request_ids: set[str]) -> dict[str, str]:
    """Which ingress replica answered each request, by its X-Request-Id (a caller's own id is kept, and
    Serve writes it on each log line of the replica that handled it): request id -> replica id."""
    folder = layout.ray_temp_dir / "session_latest" / "logs" / "serve"
    found: dict[str, str] = {}
    for log in folder.glob(f"replica_{APP_NAME}_ingress_*.log"):
        replica = log.stem.rsplit("_", 1)[-1]
        with log.open(errors="replace") as lines:
            for line in lines:
                # INFO <date> <time> acs_ingress <replica> <request id> -- <message>
                parts = line.split(" ", 6)
                if len(parts) > 5 and parts[5] in request_ids:
                    found[parts[5]] = replica
    return found


# -- down --------------------------------------------------------------------------------------

def down(layout: Layout, grace_s: float = 15.0) -> int:
    """Stop Serve's application, then every process of the rehearsal (by its marker); how many were ended.
    Never `ray stop`: it would end every Ray on the machine, other people's too."""
    if not own_pids(layout):
        say("the rehearsal is not running")
        return 0
    if health(layout) is not None or serve_status(layout):
        say("serve shutdown")
        subprocess.run([ray_bin("serve"), "shutdown", "-y", "-a", layout.dashboard_url], env=environment(layout),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=False)
    pids = own_pids(layout)
    say(f"ending {len(pids)} processes")
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while own_pids(layout) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = own_pids(layout)
    named = ", ".join(Path((_cmdline(pid) or ["?"])[0]).name for pid in left)
    for pid in left:
        _signal(pid, signal.SIGKILL)
    shutil.rmtree(layout.ray_temp_dir, ignore_errors=True)
    say("stopped" + (f" ({len(left)} needed SIGKILL: {named})" if left else ""))
    return len(pids)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def status(layout: Layout) -> None:
    if not own_pids(layout):
        say("the rehearsal is not running")
        return
    answer = health(layout)
    say(f"GET {layout.root}/health: {answer[0] if answer else 'no answer'}")
    for kind, items in sorted(processes(layout).items()):
        print(f"  {kind:28} " + ", ".join(f"pid {item['pid']} on {item['node']}" for item in items))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="up", choices=["up", "down", "status", "processes"])
    args = parser.parse_args(argv)
    layout = Layout.from_env()
    if args.command == "down":
        down(layout)
    elif args.command == "status":
        status(layout)
    elif args.command == "processes":
        print(json.dumps(processes(layout), indent=1))
    else:
        key = up(layout)
        made = rehearsal_secrets(layout)
        print(f"\nThe rehearsal serves on {layout.root}/v1 (the App: {layout.root}/apply)\n\n"
              f"  export OPENAI_BASE_URL={layout.root}/v1 ACS_API_BASE={layout.root}/v1\n"
              f"  export OPENAI_API_KEY={key} ACS_API_KEY={key}\n\n"
              f"The key is the admin user `local`'s (kept in {layout.key_file}). GET /metrics wants\n"
              f"`Authorization: Bearer {made['ACS_METRICS_TOKEN']}`. Ray's dashboard: {layout.dashboard_url}\n"
              f"(Ray's token: RAY_AUTH_TOKEN in {layout.secrets_file}). Stop it: bash cluster/rehearse.sh down\n",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
