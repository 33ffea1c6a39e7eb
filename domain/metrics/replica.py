"""The name of this replica: the `replica` label of the series each process keeps for itself.

In a Serve replica it is Serve's own replica id, the `replica` label of Serve's `ray_serve_*`
series, so a panel can join them; elsewhere (a test, a script) the host and process id.
"""
from __future__ import annotations

import os
import socket
import sys


def replica_name() -> str:
    if "ray.serve" in sys.modules:  # a process that never imported Serve is no Serve replica
        from ray import serve
        from ray.serve.exceptions import RayServeException

        try:
            return serve.get_replica_context().replica_tag
        except RayServeException:  # Serve is imported, but this process is no replica of it
            pass
    return f"{socket.gethostname()}:{os.getpid()}"
