"""Process-wide settings vLLM reads from the environment before it starts.

They must be set before `vllm` is imported, so every entry point that may
host an engine (Serve replica, tests, benches) calls `prepare_environment`.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

CPU_DEFAULTS = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    # AsyncLLM always runs its EngineCore in a child process; this keeps the
    # synchronous LLM (tests, benches) in one process, which starts faster.
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_OMP_THREADS_BIND": "0-1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_CONFIGURE_LOGGING": "0",
}


def bound_cpus(spec: str) -> int:
    """How many CPUs a VLLM_CPU_OMP_THREADS_BIND value such as "0-1,4" names."""
    count = 0
    for part in filter(None, spec.split(",")):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def prepare_environment(cpu: bool = True) -> None:
    os.environ.setdefault("VLLM_CACHE_ROOT", str(REPO_ROOT / ".vllm_cache"))
    # vLLM's ZMQ sockets outlive their engine: keep them in the project, not /tmp.
    sockets = REPO_ROOT / ".vllm_cache" / "rpc"
    sockets.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VLLM_RPC_BASE_PATH", str(sockets))
    if cpu:
        for key, value in CPU_DEFAULTS.items():
            os.environ.setdefault(key, value)
        # Ray sets OMP_NUM_THREADS=1 in an actor with a fraction of a CPU, and
        # the EngineCore process inherits it: give it the cores it is bound to.
        os.environ["OMP_NUM_THREADS"] = str(bound_cpus(os.environ["VLLM_CPU_OMP_THREADS_BIND"]))


@contextlib.contextmanager
def project_temp_files() -> Iterator[list[Path]]:
    """vLLM's file rendezvous (`vllm_dist_<hex>`, made while the engine starts) goes
    to tempfile.gettempdir() and stays there: make it in the project instead, and
    yield the list of files made, for the engine's shutdown to remove.

    The EngineCore may be a child process (a Serve replica's AsyncLLM): it
    reads TMPDIR, which it inherits; this process reads tempfile.tempdir.
    """
    folder = REPO_ROOT / ".vllm_cache" / "tmp"
    folder.mkdir(parents=True, exist_ok=True)
    before = set(folder.iterdir())
    made: list[Path] = []
    previous, tempfile.tempdir = tempfile.tempdir, str(folder)
    previous_env = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(folder)
    try:
        yield made
    finally:
        tempfile.tempdir = previous
        if previous_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = previous_env
        # Files only: a folder that appears meanwhile is a cache of compiled kernels
        # (torchinductor_<user>), which later starts reuse, and unlink() cannot remove it.
        made.extend(sorted(path for path in set(folder.iterdir()) - before if not path.is_dir()))
