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

from domain.settings import Settings, get_settings
from deployments.vllm_runtime import REPO_ROOT, prepare_environment

KEY_FILE_MODE = 0o600  # the key spends the local user's tokens: its owner alone reads it


def key_file(database_url: str | None) -> Path:
    """Where the local user's key is kept: one file per ledger (ACS_DATABASE_URL)."""
    suffix = "." + hashlib.sha256(database_url.encode()).hexdigest()[:8] if database_url else ""
    return REPO_ROOT / "var" / f"local-api-key{suffix}"


def write_private(path: Path, text: str) -> None:
    """Write `text` to a file that is 0600 from its creation on, whatever the umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, KEY_FILE_MODE)
    try:
        os.fchmod(fd, KEY_FILE_MODE)  # a file made earlier keeps its mode through O_CREAT
        data = text.encode()
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


async def prepare_ledger(settings: Settings, path: Path | None = None) -> str:
    """Apply migrations, make the local user; return its API key."""
    from cluster.admin_cli.commands import ensure_local_user_and_key
    from ledger.store.migrate import upgrade

    url = settings.ledger_url()
    await upgrade(url)
    key = await ensure_local_user_and_key(url)
    path = path or key_file(settings.database_url)
    if key is not None:
        write_private(path, key + "\n")
    if path.exists():
        path.chmod(KEY_FILE_MODE)  # a key file of an older start may be readable by others
        return path.read_text().strip()
    return "(the local user exists; make a key: python -m cluster.admin key create --user local --name NAME)"


def own_url(host: str, port: int) -> str:
    """The address this start listens on, as a link: a wildcard host is reached on loopback."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve_profile(profile: str, host: str, port: int, settings: Settings) -> None:
    from cluster.ray_env import direct_ingress_environment, free_port, prepare_ray_environment, start_local_ray

    # Before `ray` is imported: Ray reads the address that its processes listen on once, at import.
    prepare_ray_environment()
    from ray import serve

    from cluster.serve_app import build_application

    # One machine, one ingress replica: it answers on `port` itself. Serve still runs its proxy,
    # which direct ingress needs, on a port of its own that nobody is told about.
    direct_ingress_environment(port)
    start_local_ray(num_cpus=settings.num_cpus)
    serve.start(http_options={"host": host, "port": free_port(host)})
    serve.run(build_application(profile, settings), name="acs", route_prefix="/", blocking=False)


def profile_on_cpu(profile: str, settings: Settings) -> bool:
    """Whether every model of `profile` runs on the CPU; a GPU profile (the GPU bench's) gets none
    of vLLM's CPU settings, which its replicas would inherit from this process."""
    from deployments.catalog import load_catalog

    return all(spec.on_cpu for spec in load_catalog(profile, models_root=settings.models_dir).models.values())


def wait_for_signal() -> None:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()


def main() -> None:
    settings = get_settings()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", default=settings.profile)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=settings.port)
    args = parser.parse_args()
    os.environ["ACS_PROFILE"] = args.profile  # for the Serve replicas, which read their own settings
    # The App's mails link to ACS_PUBLIC_BASE_URL alone; by default here, the address this start listens on.
    os.environ["ACS_PUBLIC_BASE_URL"] = (settings.public_base_url or "").strip() or own_url(args.host, args.port)
    prepare_environment(cpu=profile_on_cpu(args.profile, settings))
    key = asyncio.run(prepare_ledger(settings))
    serve_profile(args.profile, args.host, args.port, settings)
    base = f"http://{args.host}:{args.port}/v1"
    print(f"\nThe platform serves on {base}\n\n  export ACS_API_BASE={base}\n  export ACS_API_KEY={key}\n", flush=True)
    print(f"The App: http://{args.host}:{args.port}/apply, then `python -m cluster.admin application approve EMAIL`;"
          f" its mail is a file in {settings.mail_outbox if settings.smtp_url is None else 'your SMTP server'}\n", flush=True)
    try:
        wait_for_signal()
    finally:
        import ray
        from ray import serve

        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
