"""Process-wide settings vLLM reads from the environment before it starts.

They must be set before `vllm` is imported, so every entry point that may
host an engine (Serve replica, tests, benches) calls `prepare_environment`.
"""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

CPU_DEFAULTS = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    # One process: the uni executor starts in seconds, and vllm-lens reads
    # the model runner in the same process.
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_OMP_THREADS_BIND": "0-1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_CONFIGURE_LOGGING": "0",
}


def prepare_environment(cpu: bool = True) -> None:
    os.environ.setdefault("VLLM_CACHE_ROOT", str(REPO_ROOT / ".vllm_cache"))
    if cpu:
        for key, value in CPU_DEFAULTS.items():
            os.environ.setdefault(key, value)
