"""`python -m tests.unit.local_ray_probe MARKER`: the embedded default's Ray and Serve, started as
cluster/embedded.py starts them, with one small deployment. Prints, as JSON after `PROBE ` (Ray's
processes print to the same stdout), every socket that their processes listen on, and how each port
of the Serve replica that listens beyond loopback answered a caller without Ray's token who sent a
pickle that, once loaded, makes the file MARKER.

A process of its own (tests/unit/test_ray_env.py runs it): a Ray started in the test process would
stay in it, and Ray reads some of its environment once, when `ray` is first imported.
"""
from __future__ import annotations

import sys

from cluster.ray_env import prepare_ray_environment

prepare_ray_environment()  # before `ray` is imported, as cluster/embedded.py does

import ipaddress  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402

import grpc  # noqa: E402
import psutil  # noqa: E402

SERVE_GRPC_CALL = "/ray.serve.ASGIService/HandleRequest"  # what a replica's gRPC server answers
REPORT = "PROBE "


class MakesTheMarker:
    """Unpickled, it opens (and so makes) the marker file: code of the caller's choice ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (self.path, "w"))


def listeners() -> list[tuple[str, str, int]]:
    """(process name, address, port) of every listening TCP socket of this process and its children."""
    me = psutil.Process()
    found = []
    for process in [me, *me.children(recursive=True)]:
        try:
            sockets = process.net_connections(kind="inet")
            name = process.name()
        except psutil.NoSuchProcess:
            continue
        found += [(name, s.laddr.ip, s.laddr.port) for s in sockets if s.status == psutil.CONN_LISTEN]
    return found


def on_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_loopback or bool(getattr(ip, "ipv4_mapped", None) and ip.ipv4_mapped.is_loopback)


def call_without_token(port: int, marker: str) -> str:
    """The status that a call without Ray's token gets from a replica's gRPC server."""
    from ray.serve.generated import serve_pb2

    request = serve_pb2.ASGIRequest(pickled_request_metadata=pickle.dumps(MakesTheMarker(marker)))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            channel.unary_unary(SERVE_GRPC_CALL)(request.SerializeToString(), timeout=10)
        except grpc.RpcError as refused:
            return refused.code().name
    return "OK"


def main(marker: str) -> None:
    import ray
    from ray import serve

    from cluster.ray_env import direct_ingress_environment, free_port, start_local_ray

    direct_ingress_environment(free_port("127.0.0.1"))
    start_local_ray(num_cpus=2)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": free_port("127.0.0.1")})

        @serve.deployment(ray_actor_options={"num_cpus": 0.1})
        class Echo:
            async def __call__(self, text: str = "") -> str:
                return text

        handle = serve.run(Echo.bind(), name="probe", route_prefix="/", blocking=False)
        assert handle.remote("up").result(timeout_s=60) == "up"
        found = listeners()
        open_ports = {port for name, address, port in found if "ServeReplica" in name and not on_loopback(address)}
        answers = {port: call_without_token(port, marker) for port in sorted(open_ports)}
        print(REPORT + json.dumps({"listeners": found, "answers": answers}), flush=True)
    finally:
        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
