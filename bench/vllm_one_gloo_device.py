"""`--vllm-one-gloo-device`: vLLM's own server with our engine's one gloo device.

vLLM imports a `worker_extension_cls` in its worker's process before it makes
its process groups; importing this module there shares one gloo device among
them, as deployments/worker_extension.py does for our engine on a CPU. The
bench's baseline is then vLLM's server with the same engine process as ours,
and the ratio is the platform's path alone.
"""
from __future__ import annotations

from deployments.gloo_device import share_one_device

share_one_device()


class OneGlooDevice:
    """Adds nothing to vLLM's worker: the import above is the point."""
