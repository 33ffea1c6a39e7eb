"""`python -m cluster.embedded`: the whole platform on one machine.

A local Ray instance, the Serve application of the embedded profile
(SmolLM2-135M on the CPU), the SQLite ledger with a local user, on
127.0.0.1. Stops cleanly on SIGTERM or Ctrl-C.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import signal
import threading
from pathlib import Path

from deployments.vllm_runtime import REPO_ROOT, prepare_environment

def key_file() -> Path:
    """Where the local user's key is kept: one file per ledger."""
    url = os.environ.get("ACS_DATABASE_URL")
    suffix = "." + hashlib.sha256(url.encode()).hexdigest()[:8] if url else ""
    return REPO_ROOT / "var" / f"local-api-key{suffix}"


async def prepare_ledger() -> str:
    """Apply migrations, make the local user; return its API key."""
    from ledger.admin import ensure_local_user_and_key
    from ledger.db import database_url_from_env
    from ledger.migrate import upgrade

    url = os.environ.get("ACS_DATABASE_URL") or database_url_from_env()
    await upgrade(url)
    key = await ensure_local_user_and_key(url)
    path = key_file()
    if key is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(key + "\n")
        path.chmod(0o600)
    if path.exists():
        return path.read_text().strip()
    return "(the local user exists; make a key: python -m ledger.admin key create --user local --name NAME)"


def serve_profile(profile: str, host: str, port: int) -> None:
    from ray import serve

    from cluster.ray_env import start_local_ray
    from cluster.serve_app import build_application

    start_local_ray(num_cpus=int(os.environ.get("ACS_NUM_CPUS", "2")))
    serve.start(http_options={"host": host, "port": port})
    serve.run(build_application(profile), name="acs", route_prefix="/", blocking=False)


def wait_for_signal() -> None:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", default=os.environ.get("ACS_PROFILE", "embedded"))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("ACS_PORT", "8000")))
    args = parser.parse_args()
    os.environ["ACS_PROFILE"] = args.profile
    prepare_environment(cpu=True)
    key = asyncio.run(prepare_ledger())
    serve_profile(args.profile, args.host, args.port)
    base = f"http://{args.host}:{args.port}/v1"
    print(f"\nThe platform serves on {base}\n\n  export ACS_API_BASE={base}\n  export ACS_API_KEY={key}\n", flush=True)
    try:
        wait_for_signal()
    finally:
        import ray
        from ray import serve

        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
