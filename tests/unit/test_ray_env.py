"""The local Ray: nobody who reaches the machine gets in (its address and Ray's token), and its
housekeeping settings, set unless the operator set them and read by Ray."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.ray_env import LOCAL_HOUSEKEEPING, LOCAL_RAY, prepare_ray_environment
from tests.unit.local_ray_probe import REPORT, on_loopback

ROOT = Path(__file__).resolve().parents[2]
# Ray's C++ settings (RAY_<name> of ray_config_def.h) are read by the binaries they are compiled into.
RAY_BINARIES = ("core/src/ray/raylet/raylet", "core/src/ray/gcs/gcs_server", "_raylet.so")


def test_a_local_ray_gets_the_housekeeping_settings_and_keeps_what_the_operator_set(monkeypatch):
    for key in LOCAL_HOUSEKEEPING:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("RAY_SERVE_METRICS_EXPORT_INTERVAL_MS", "250")
    prepare_ray_environment()
    assert os.environ["RAY_SERVE_METRICS_EXPORT_INTERVAL_MS"] == "250"
    for key, value in LOCAL_HOUSEKEEPING.items():
        if key != "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS":
            assert os.environ[key] == value


def test_rays_python_reads_each_python_setting():
    probe = """
import json
from ray._private import log_monitor
from ray.dashboard.modules.reporter import reporter_consts
from ray.serve._private import constants
print(json.dumps({
    "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": constants.RAY_SERVE_METRICS_EXPORT_INTERVAL_MS,
    "RAY_LOG_MONITOR_MANY_FILES_THRESHOLD": log_monitor.RAY_LOG_MONITOR_MANY_FILES_THRESHOLD,
    "REPORTER_UPDATE_INTERVAL_MS": reporter_consts.REPORTER_UPDATE_INTERVAL_MS,
}))
"""
    env = {**os.environ, **LOCAL_HOUSEKEEPING}
    seen = json.loads(subprocess.run([sys.executable, "-c", probe], env=env, check=True, capture_output=True,
                                     text=True, timeout=120).stdout.splitlines()[-1])
    assert seen == {key: int(LOCAL_HOUSEKEEPING[key]) for key in seen}


@pytest.fixture(scope="module")
def ray_binaries() -> list[bytes]:
    """Ray's binaries, read once for all the settings (about 80 MB)."""
    import ray

    root = Path(ray.__file__).parent
    return [(root / binary).read_bytes() for binary in RAY_BINARIES]


@pytest.mark.parametrize("key", [key for key in LOCAL_HOUSEKEEPING if key.startswith("RAY_") and key[4].islower()])
def test_rays_binaries_know_each_cpp_setting(key, ray_binaries):
    assert any(key.encode() in binary for binary in ray_binaries), key


# -- who gets in ------------------------------------------------------------------------------------------

def fresh_environment() -> dict[str, str]:
    """This process's environment without what cluster/ray_env.py set in it (tests/conftest.py did)."""
    ours = {*LOCAL_RAY, "RAY_AUTH_TOKEN", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_AUTH_MODE"}
    return {key: value for key, value in os.environ.items() if key not in ours}


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The embedded default's Ray and Serve, started once in a process of their own (about 20 s)."""
    marker = tmp_path_factory.mktemp("ray") / "made-by-a-caller-without-the-token"
    done = subprocess.run([sys.executable, "-m", "tests.unit.local_ray_probe", str(marker)], cwd=ROOT,
                          env=fresh_environment(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (report,) = [line[len(REPORT):] for line in done.stdout.splitlines() if line.startswith(REPORT)]
    return {**json.loads(report), "marker": marker}


def test_rays_own_processes_listen_on_loopback_only(local_ray):
    found = local_ray["listeners"]
    assert {"gcs_server", "raylet"} <= {name for name, _, _ in found}  # the probe saw Ray's processes
    # Serve's replicas are apart: Ray binds their gRPC server to every interface (the next test).
    beyond = [(name, address, port) for name, address, port in found
              if not on_loopback(address) and "ServeReplica" not in name]
    assert beyond == []


def test_what_listens_beyond_loopback_refuses_a_caller_without_rays_token(local_ray):
    """A Serve replica's gRPC server listens on every interface and unpickles what it is sent: without
    Ray's token the caller is refused, and the pickle it sent never ran."""
    answers = local_ray["answers"]
    assert answers and set(answers.values()) == {"UNAUTHENTICATED"}, answers
    assert not local_ray["marker"].exists()


def test_a_local_ray_refuses_to_start_on_the_machines_address(tmp_path):
    """`ray` imported before cluster.ray_env set its environment: Ray picked the machine's address."""
    late = "import ray\nfrom cluster.ray_env import start_local_ray\nstart_local_ray(num_cpus=1)\n"
    done = subprocess.run([sys.executable, "-c", late], cwd=ROOT, env=fresh_environment(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0
    assert "could run code in it: call cluster.ray_env.prepare_ray_environment() before `ray` is first imported" in (
        done.stderr)
    assert "Started a local Ray instance" not in done.stderr


def test_a_local_ray_refuses_to_start_without_rays_token(tmp_path):
    early = "from cluster.ray_env import start_local_ray\nstart_local_ray(num_cpus=1)\n"
    done = subprocess.run([sys.executable, "-c", early], cwd=ROOT, env={**fresh_environment(), "RAY_AUTH_MODE": "disabled"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "A local Ray with RAY_AUTH_MODE=disabled would let anyone who reaches this machine run code" in done.stderr
    assert "Started a local Ray instance" not in done.stderr


def test_each_process_gets_a_token_of_its_own_and_keeps_one_set_before(monkeypatch):
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    prepare_ray_environment()
    first = os.environ["RAY_AUTH_TOKEN"]
    assert len(first) == 64 and os.environ["RAY_AUTH_MODE"] == "token"
    prepare_ray_environment()
    assert os.environ["RAY_AUTH_TOKEN"] == first
    monkeypatch.delenv("RAY_AUTH_TOKEN")
    prepare_ray_environment()
    assert os.environ["RAY_AUTH_TOKEN"] != first
