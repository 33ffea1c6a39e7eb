"""A worker extension for the slow-llama test model: the real one, with pauses.

vLLM imports it in its worker process (configs/models/slow-llama.yaml names it),
where it holds the model's load and its memory profiling for a few seconds
each, so that the boot stages of a real start last long enough to be seen.
"""
from __future__ import annotations

import time

from vllm.v1.worker.cpu_worker import CPUWorker

from deployments.worker_extension import WorkerExtension

LOAD_S = 2.0  # weights_loading
PREPARE_S = 2.0  # weights_loaded: vLLM's profiling and warm-up


def _paused(pause_s: float, method):  # noqa: ANN001, ANN202
    def slow(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        time.sleep(pause_s)
        return method(self, *args, **kwargs)

    return slow


CPUWorker.load_model = _paused(LOAD_S, CPUWorker.load_model)
CPUWorker.determine_available_memory = _paused(PREPARE_S, CPUWorker.determine_available_memory)


class SlowLoadExtension(WorkerExtension):
    """The platform's worker extension; importing this module slows the start."""
