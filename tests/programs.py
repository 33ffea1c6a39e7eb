"""The spec's own programs (tests/spec_programs/), run as a user runs them."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PROGRAMS = TESTS / "spec_programs"
# Python 3.14's compression.zstd, for the programs' subprocesses only.
SHIMS = TESTS / "shims"


def run_program(name: str, base: str, key: str) -> str:
    """Run spec_programs/<name>.py against `base` with `key`; what it printed."""
    env = {**os.environ, "ACS_API_BASE": base, "ACS_API_KEY": key, "PYTHONPATH": str(SHIMS)}
    done = subprocess.run([sys.executable, str(PROGRAMS / f"{name}.py")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
