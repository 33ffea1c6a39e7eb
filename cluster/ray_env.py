"""Environment for a local Ray instance; set before `ray` starts anything."""
from __future__ import annotations

import ipaddress
import os
import secrets
import socket
from pathlib import Path

OBJECT_STORE_BYTES = 128 * 1024 * 1024
SERVE_ENV = Path(__file__).with_name("serve.env")


def serve_environment() -> dict[str, str]:
    """The KEY=VALUE lines of cluster/serve.env, which the cluster files source too."""
    pairs = {}
    for line in SERVE_ENV.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            pairs[key.strip()] = value.strip()
    return pairs


# What a Ray that the platform starts itself runs with, beside cluster/serve.env.
LOCAL_RAY = {
    "RAY_USAGE_STATS_ENABLED": "0",
    # Ray's switch for a Ray of one machine: its node's address is then 127.0.0.1, where the GCS,
    # the raylet, the workers and Ray's agents listen. On the machine's own address, anyone who
    # reached it could join this Ray and run code in it. Ray reads it once, when `ray` is first
    # imported (start_local_ray checks that it took).
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    # Ray's token authentication, with a token of this process's own (prepare_ray_environment) that
    # every Ray process it starts inherits. Serve binds each replica's gRPC server to every interface
    # whatever the node's address (Ray 2.60: "[::]:0"), and that server unpickles what it is sent:
    # the token is what keeps others out of it. Explicit, with the token in the environment: else the
    # first ray.init writes ~/.ray/auth_token, and later clusters on this machine demand it.
    "RAY_AUTH_MODE": "token",
    "RAY_DEDUP_LOGS": "0",
    # Serve's controller wakes every 0.1 s by default; on a 2-core machine each
    # wake-up can stall a step of the engine's OpenMP threads.
    "RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "0.5",
    # Ray runs workers at nice 15; the engine and the ingress are the service here.
    "RAY_worker_niceness": "0",
    # A local Ray has no Prometheus to scrape its own series (a cluster keeps them: `ray start
    # --metrics-export-port`), and collecting them wakes every worker and the agent.
    "RAY_enable_metrics_collection": "0",
}

# How often Ray's own processes wake at idle, on one machine. The engine's OpenMP threads run on
# every core, and whatever else runs takes its time from a step: on 2 cores Ray's and Serve's own
# processes took 54-91 core-ms from each 1-second request of `bench/completions_overhead.py
# --concurrency 1` (bench/NOTES.md, "Ray's housekeeping at idle"). None of these changes what a
# request does; each makes a local record or report less frequent.
LOCAL_HOUSEKEEPING = {
    # Serve's replicas, proxy and handles export their cached request metrics every 0.1 s.
    "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": "1000",
    # The log monitor lists the log folder every 0.1 s while it holds fewer than this many files;
    # with 0 it lists it every 0.5 s (new lines are still read every 0.1 s).
    "RAY_LOG_MONITOR_MANY_FILES_THRESHOLD": "0",
    # Each worker reports its task events (`ray list tasks`) every second.
    "RAY_task_events_report_interval_ms": "5000",
    # The raylet reports its resources to the GCS every 0.1 s; with one node nobody else
    # schedules on them.
    "RAY_raylet_report_resources_period_milliseconds": "1000",
    # Every event loop of every Ray process probes its own lag for a metric that nobody collects.
    "RAY_io_context_event_loop_lag_collection_interval_ms": "-1",
    # The dashboard agent reads every Ray process's usage for the dashboard every 5 s.
    "REPORTER_UPDATE_INTERVAL_MS": "10000",
}


def prepare_ray_environment() -> None:
    """Each setting of cluster/serve.env, LOCAL_RAY and LOCAL_HOUSEKEEPING that the environment
    does not set already; where serve.env names a key too, its value wins, as on the nodes. And
    Ray's token for the Ray that this process starts: random, and nowhere but in its environment."""
    for key, value in {**LOCAL_RAY, **LOCAL_HOUSEKEEPING, **serve_environment()}.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))


def direct_ingress_environment(port: int) -> None:
    """Serve's direct ingress: the one ingress replica listens on `port` itself, so a request
    and each event of a stream skip the hop through Serve's proxy actor (bench/NOTES.md, "Direct
    ingress"). Set before `ray` starts: the controller and the replicas read it when they start."""
    os.environ.update(
        RAY_SERVE_ENABLE_DIRECT_INGRESS="1",
        # Serve hands ingress replicas the ports of [MIN, MAX): here the one port asked for.
        RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT=str(port),
        RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT=str(port + 1),
        # Serve holds a stopping replica open this long for a load balancer to drop it first;
        # none stands in front here, so a stop waits for the requests in flight alone.
        RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S="0",
        # The replica that follows a killed one takes the same port at once, not after a pause.
        RAY_SERVE_PORT_QUARANTINE_S="0",
    )


def free_port(host: str) -> int:
    """A port on `host` that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def refuse_an_open_ray(node_address: str, auth_mode: str) -> None:
    """Before ray.init: a local Ray on the machine's network address, or without Ray's token, would
    let anyone who reaches the machine run code in it."""
    if not ipaddress.ip_address(node_address).is_loopback:
        raise RuntimeError(
            f"A local Ray would listen on {node_address}, where anyone who reaches this machine could run "
            "code in it: call cluster.ray_env.prepare_ray_environment() before `ray` is first imported, and "
            "leave RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER unset or 0.")
    if auth_mode.strip().lower() != "token":
        raise RuntimeError(
            f"A local Ray with RAY_AUTH_MODE={auth_mode} would let anyone who reaches this machine run code "
            "in its Serve replicas, which listen on every interface: leave RAY_AUTH_MODE unset or token.")


def start_local_ray(num_cpus: int | None = None) -> None:
    prepare_ray_environment()
    import ray

    refuse_an_open_ray(ray.util.get_node_ip_address(), os.environ["RAY_AUTH_MODE"])
    ray.init(
        address="local", num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
        object_store_memory=OBJECT_STORE_BYTES, log_to_driver=True,
    )
