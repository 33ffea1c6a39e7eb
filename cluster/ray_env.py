"""Environment for a local Ray instance; set before `ray` starts anything."""
from __future__ import annotations

import os
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


def prepare_ray_environment() -> None:
    for key, value in serve_environment().items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Explicit, or the first ray.init writes ~/.ray/auth_token and later clusters demand it.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # Serve's controller wakes every 0.1 s by default; on a 2-core machine each
    # wake-up can stall a step of the engine's OpenMP threads.
    os.environ.setdefault("RAY_SERVE_CONTROL_LOOP_INTERVAL_S", "0.5")
    # Ray runs workers at nice 15; the engine and the ingress are the service here.
    os.environ.setdefault("RAY_worker_niceness", "0")
    # A local Ray has no Prometheus to scrape its own series (a cluster keeps them: `ray start
    # --metrics-export-port`), and collecting them wakes every worker and the agent.
    os.environ.setdefault("RAY_enable_metrics_collection", "0")


def start_local_ray(num_cpus: int | None = None) -> None:
    import ray

    prepare_ray_environment()
    ray.init(
        address="local", num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
        object_store_memory=OBJECT_STORE_BYTES, log_to_driver=True,
    )
