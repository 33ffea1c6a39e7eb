"""One gloo device for all of a CPU engine's process groups.

torch gives every gloo process group a device of its own, and gloo runs a
thread per device that wakes every 10 ms (its TCP loop polls with a fixed
timeout). vLLM's CPU engine makes 13 such groups in its process (the world,
TP, PP, DP, EP... each as a CPU and a device group), so 13 threads wake 1,300
times a second, though with one rank no group ever sends a byte. On 2 cores
each wake-up takes a core from one of the engine's two OpenMP threads, and the
other waits for it at the end of the step (bench/NOTES.md, "The engine's gloo
threads"). With one device for all groups, one thread is left; the groups, their
ranks and their collectives stay as they were.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

# What torch's ProcessGroupGloo(store, rank, size) gives a group without a timeout.
TORCH_DEFAULT_TIMEOUT = timedelta(minutes=30)
# torch gives a group two worker threads per device.
THREADS_PER_DEVICE = 2


def share_one_device() -> None:
    """From now on, every gloo process group made in this process uses one device. Idempotent."""
    from torch.distributed import distributed_c10d

    gloo = distributed_c10d.ProcessGroupGloo
    if not getattr(gloo, "shares_one_device", False):
        # torch (and vLLM's stateless groups) look the class up here each time they make a group.
        distributed_c10d.ProcessGroupGloo = _one_device_gloo(gloo)


def _one_device_gloo(gloo: Any) -> Any:
    device: list[Any] = []

    class OneDeviceGloo(gloo):
        shares_one_device = True

        def __init__(self, store: Any, rank: int, size: int, timeout: Any = TORCH_DEFAULT_TIMEOUT) -> None:
            if isinstance(timeout, gloo._Options):  # the caller chose its own devices
                super().__init__(store, rank, size, timeout)
                return
            if not device:
                device.append(gloo.create_default_device())
            options = gloo._Options()
            options._devices = device
            options._threads = THREADS_PER_DEVICE
            options._timeout = timeout
            super().__init__(store, rank, size, options)

    return OneDeviceGloo
