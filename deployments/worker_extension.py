"""The worker extension that vLLM loads into each of its workers (`worker_extension_cls`).

vLLM imports it in the worker's own process before it loads the model, so
what this module sets up applies where the engine starts and where the hooks
run: vllm-lens's extension with our fixes of its traps, the reports of the
engine's start (deployments/engine_stages.py), and on a CPU one gloo device for
the process's groups (deployments/gloo_device.py), before vLLM makes them.
"""
from __future__ import annotations

from vllm.platforms import current_platform

from deployments.engine_stages import report_weight_loading
from deployments.gloo_device import share_one_device
from deployments.lens_fixes import FixedHiddenStatesExtension

report_weight_loading()
if current_platform.is_cpu():
    share_one_device()


class WorkerExtension(FixedHiddenStatesExtension):
    """vllm-lens's worker extension; importing this module reports the stages too."""
