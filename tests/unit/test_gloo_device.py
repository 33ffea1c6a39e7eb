"""deployments.gloo_device: the process groups made after share_one_device() use one gloo
device, so one thread of gloo's TCP loop, and their collectives still answer right.

In a child process: torch.distributed's state is process-wide.
"""
from __future__ import annotations

import json
import subprocess
import sys

from cluster.ray_env import free_port

CHILD = """
import json, os, sys
from datetime import timedelta
import torch
import torch.distributed as dist
from deployments.gloo_device import share_one_device

def loop_threads():
    return sum(open(f"/proc/self/task/{tid}/comm").read().startswith("gloo_tcp_loop")
               for tid in os.listdir("/proc/self/task"))

dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=0, world_size=1)
counts = {"world": loop_threads()}
own = [dist.new_group([0], backend="gloo") for _ in range(3)]
counts["three of their own"] = loop_threads()
share_one_device()
share_one_device()  # a second call changes nothing
shared = [dist.new_group([0], backend="gloo", timeout=timedelta(seconds=7))
          for _ in range(4)]
counts["four sharing one"] = loop_threads()
sums = []
for group in own + shared:
    tensor = torch.arange(4, dtype=torch.float32)
    dist.all_reduce(tensor, group=group)
    dist.broadcast(tensor, 0, group=group)
    sums.append(tensor.tolist())
timeouts = [group._get_backend(torch.device("cpu")).options._timeout.total_seconds() for group in shared]
print(json.dumps({"counts": counts, "sums": sums, "timeouts": timeouts}))
dist.destroy_process_group()
"""


def test_groups_made_after_the_call_share_one_loop_thread_and_still_reduce() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(free_port("127.0.0.1"))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    counts = seen["counts"]
    # Before the call each group brings a device, and a loop thread, of its own.
    assert counts["three of their own"] == counts["world"] + 3
    # After it the first group makes the one shared device; the next three add none.
    assert counts["four sharing one"] == counts["three of their own"] + 1
    assert seen["sums"] == [[0.0, 1.0, 2.0, 3.0]] * 7  # one rank: a sum and a broadcast leave it as it was
    assert seen["timeouts"] == [7.0] * 4  # the group's own timeout, as torch would have set it
