"""The local Ray's housekeeping settings: set unless the operator set them, and read by Ray."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.ray_env import LOCAL_HOUSEKEEPING, prepare_ray_environment

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
