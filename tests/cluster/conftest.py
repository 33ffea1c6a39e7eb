"""The cluster rehearsal for the tests of this folder: `bash cluster/rehearse.sh` once per session, on
ports, a database, a Redis db index and folders of the session's own, and `down` at its end."""
from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from cluster.rehearsal import Layout, rehearsal_secrets
from ledger.store.pg_admin import ADMIN_DSN, drop_database, recreate_database
from tests.ledger_fixtures import DB_TAG
from tests.serve_fixtures import PORT, ServeInstance, run_async

ROOT = Path(__file__).resolve().parents[2]
# Not the session's `serve_instance` port: the browser tier's Serve proxy lives to the session's end, and
# Serve's proxies bind with SO_REUSEPORT, so on one port the kernel split the rehearsal's requests between
# both proxies and the other one answered 404 (CI, stop 45).
REHEARSAL_PORT = int(os.environ.get("ACS_TEST_REHEARSAL_PORT", str(PORT + 20)))
# Apart from a rehearsal that someone runs on this machine with the defaults (8000, 6380, 8265, ...).
LAYOUT = {
    "ACS_REHEARSAL_HTTP_PORT": str(REHEARSAL_PORT), "ACS_REHEARSAL_RAY_PORT": "6480",
    "ACS_REHEARSAL_DASHBOARD_PORT": "8365", "ACS_REHEARSAL_CLIENT_PORT": "29300", "ACS_REHEARSAL_PORT_BASE": "28400",
    "ACS_REHEARSAL_REDIS_DB": "8",
    "ACS_REHEARSAL_DATABASE": f"acs_rehearsal_test{DB_TAG}",
    "ACS_REHEARSAL_RAY_TEMP_DIR": f"/tmp/acs-rehearsal-test{DB_TAG}",
    # cluster/test.sh ran cluster/setup.sh already.
    "ACS_REHEARSAL_SKIP_SETUP": "1",
}


@dataclass
class Rehearsal:
    layout: Layout
    key: str  # the admin user `local`'s, as rehearse.sh printed it
    metrics_token: str
    up_s: float  # how long `rehearse.sh` took to serve
    ledger: ServeInstance  # new keys, reads of the ledger

    @property
    def base(self) -> str:
        return f"{self.layout.root}/v1"


def script_environment(state_dir: Path) -> dict[str, str]:
    """The environment of a shell that runs the script: none of the settings that tests/conftest.py gave this
    process for its own local Ray and engines (Ray's token among them), which the nodes would inherit."""
    own = ("RAY_", "ACS_", "VLLM_", "REPORTER_", "OMP_", "HF_", "TRANSFORMERS_")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(own)}, **LAYOUT,
            "ACS_REHEARSAL_STATE_DIR": str(state_dir)}


def rehearse(env: dict[str, str], command: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "cluster/rehearse.sh", command], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout_s)


# The package's, not the session's: the three nodes, two engines and the harvest host hold about 6-10 GB
# and both cores' attention, so they end before the e2e tier's stacks start (with a session scope they
# lived to the session's end, and the e2e modules after them failed on a starved machine).
@pytest.fixture(scope="package")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rehearsal]:
    env = script_environment(tmp_path_factory.mktemp("rehearsal"))
    layout = Layout.from_env(env)
    run_async(recreate_database(ADMIN_DSN, layout.database))
    started = time.monotonic()
    try:
        up = rehearse(env, "up", 900)
        assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-4000:]
        key = layout.key_file.read_text().strip()
        assert f"OPENAI_API_KEY={key}" in up.stdout  # it prints the key that it made
        yield Rehearsal(layout, key, rehearsal_secrets(layout)["ACS_METRICS_TOKEN"], time.monotonic() - started,
                        ServeInstance(layout.database_url))
    finally:
        down = rehearse(env, "down", 300)
        print(f"\nrehearse.sh down: {down.stdout[-500:]}{down.stderr[-500:]}")
        run_async(drop_database(ADMIN_DSN, layout.database))


def dump(value: object) -> str:
    return json.dumps(value, indent=1, default=str)
