"""A cold model on the test cluster: an actor holds the CPUs that the model's replica needs, as
another job holds a model's GPUs, so Serve cannot place the replica until the holder goes
(tests/e2e/test_e2e_boot.py, tests/browser/test_browser_loom_start.py)."""
from __future__ import annotations

from typing import Any

import ray


@ray.remote(num_cpus=0)
class CpuHolder:
    """Holds CPUs while it lives (its options give the amount)."""

    def ready(self) -> bool:
        return True


def hold_the_free_cpus() -> Any:
    """The holder of the cluster's free CPUs but 0.25; `ray.kill` it to free them."""
    free = ray.available_resources().get("CPU", 0.0)
    # Leave less than the model replica's 0.5 CPU, so Ray cannot place it.
    holder = CpuHolder.options(num_cpus=round(free - 0.25, 2)).remote()
    ray.get(holder.ready.remote(), timeout=30)
    return holder
