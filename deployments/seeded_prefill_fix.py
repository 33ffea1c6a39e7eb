"""A fix of vLLM's CPU engine, applied in its EngineCore process (imported by
the worker extension, `deployments/lens_fixes.py`).

vLLM samples a token for a request whose prompt is only partly prefilled in a
step, throws that token away, and rewinds the request's seeded generator with
`set_offset(get_offset() - 4)`: the Philox offset of a CUDA generator. A CPU
generator has no offset, raises "CPU Generator does not use offset", and the
EngineCore dies. Every Loom Node has a seed, so a Branch under a long path, or
several seeded prompts prefilled together, killed the engine.

The same rewind, done the CPU way: the generator's state is kept before the
step samples, and put back after it, so the thrown-away sample never happened
and a chunked seeded prompt samples exactly what an unchunked one does.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

_original_sample = GPUModelRunner._sample
_original_bookkeeping_sync = GPUModelRunner._bookkeeping_sync


class _AlreadyRewound:
    """Stands in for a CPU generator during vLLM's offset rewind, whose state is already put back."""

    def get_offset(self) -> int:
        return 0

    def set_offset(self, _offset: int) -> None:
        pass


def _thrown_away_cpu_generators(runner: Any) -> dict[int, tuple[Any, Any]]:
    """The seeded CPU generators of the requests whose sample of this step is thrown away."""
    num_reqs = runner.input_batch.num_reqs
    kept = {}
    for index in np.nonzero(runner.discard_request_mask.np[:num_reqs])[0]:
        generator = runner.input_batch.generators.get(int(index))
        if generator is not None and generator.device.type == "cpu":
            kept[int(index)] = (generator, generator.get_state())
    return kept


def _sample(self: Any, *args: Any, **kwargs: Any) -> Any:
    self._acs_thrown_away = _thrown_away_cpu_generators(self)
    return _original_sample(self, *args, **kwargs)


def _bookkeeping_sync(self: Any, *args: Any, **kwargs: Any) -> Any:
    kept, self._acs_thrown_away = getattr(self, "_acs_thrown_away", {}), {}
    generators = self.input_batch.generators
    for index, (generator, state) in kept.items():
        generator.set_state(state)
        generators[index] = _AlreadyRewound()
    try:
        return _original_bookkeeping_sync(self, *args, **kwargs)
    finally:
        for index, (generator, _state) in kept.items():
            generators[index] = generator


GPUModelRunner._sample = _sample
GPUModelRunner._bookkeeping_sync = _bookkeeping_sync
