"""The cluster rehearsal's Serve config is the GPU cluster's but for the differences its header lists,
and it builds the cluster profile as `serve deploy` would: a deployment per model that scales to zero
on the `models` resource. And the rehearsal's layout gives every node ports of its own."""
from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
from ray.serve._private.build_app import build_app
from ray.serve.deployment import deployment_to_schema
from ray.serve.schema import ServeDeploySchema

from cluster.rehearsal import Layout, node_environment, port_taken, render_config, up
from cluster.ray_env import serve_environment
from deployments.catalog import load_catalog

CLUSTER = Path(__file__).resolve().parents[2] / "cluster"
# (path of keys, the GPU file's value, the rehearsal's): every difference the rehearsal's header lists.
ALLOWED = {
    ("proxy_location",): ("EveryNode", "HeadOnly"),
    ("http_options", "host"): ("0.0.0.0", "127.0.0.1"),
    ("applications", 0, "args", "profile"): ("gpu", "cluster"),
    ("applications", 0, "runtime_env", "env_vars", "ACS_PROFILE"): ("gpu", "cluster"),
}


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((CLUSTER / name).read_text())


def differences(a: Any, b: Any, path: tuple = ()) -> dict[tuple, tuple[Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        found: dict[tuple, tuple[Any, Any]] = {}
        for key in a.keys() | b.keys():
            found.update(differences(a.get(key), b.get(key), (*path, key)))
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        found = {}
        for index, (x, y) in enumerate(zip(a, b)):
            found.update(differences(x, y, (*path, index)))
        return found
    return {} if a == b else {path: (a, b)}


def test_the_rehearsal_differs_from_the_gpu_config_only_where_its_header_says() -> None:
    assert differences(load("serve-gpu.yaml"), load("serve-rehearsal.yaml")) == ALLOWED
    header = (CLUSTER / "serve-rehearsal.yaml").read_text().split("\n\n")[0]
    for listed in ("proxy_location: HeadOnly", "http_options.host: 127.0.0.1", "ACS_PROFILE: cluster"):
        assert listed in header


def test_the_rendered_config_moves_the_port_alone(tmp_path: Path) -> None:
    layout = Layout.from_env({"ACS_REHEARSAL_HTTP_PORT": "8690", "ACS_REHEARSAL_STATE_DIR": str(tmp_path)})
    rendered = yaml.safe_load(render_config(layout).read_text())
    assert differences(load("serve-rehearsal.yaml"), rendered) == {("http_options", "port"): (8000, 8690)}
    ServeDeploySchema.model_validate(rendered)


def test_the_rehearsal_config_builds_the_cluster_profile() -> None:
    (app,) = load("serve-rehearsal.yaml")["applications"]
    module, _, name = app["import_path"].partition(":")
    builder = getattr(__import__(module, fromlist=[name]), name)
    application = call_user_app_builder_with_args_if_necessary(builder, app["args"])
    deployments = {d.name: deployment_to_schema(d) for d in build_app(application, name=app["name"]).deployments}
    assert set(deployments) == {"model-tiny-llama", "model-smollm2-135m", "ingress", "runner"}
    for model_id, spec in load_catalog("cluster").models.items():
        schema: Any = deployments[f"model-{model_id}"]  # Serve's schema types its options loosely
        assert schema.ray_actor_options.resources == {"models": 1}
        assert schema.autoscaling_config.min_replicas == 0
        assert schema.autoscaling_config.downscale_to_zero_delay_s == spec.autoscaling.downscale_to_zero_delay_s
    overrides = {d["name"]: d for d in app["deployments"]}
    assert overrides["ingress"]["num_replicas"] == 2
    assert overrides["runner"]["ray_actor_options"]["resources"] == {"api": 1}


def test_every_node_has_ports_of_its_own_and_the_ray_port_is_not_redis() -> None:
    layout = Layout.from_env({})
    ports = [layout.http_port, layout.gcs_port, layout.dashboard_port, layout.client_port]
    for node in layout.nodes:
        ports += [node.node_manager_port, node.object_manager_port, node.dashboard_agent_listen_port,
                  node.dashboard_agent_grpc_port, node.metrics_export_port, node.runtime_env_agent_port]
    workers = [set(range(n.min_worker_port, n.max_worker_port + 1)) for n in layout.nodes]
    assert len(set(ports)) == len(ports) and 6379 not in ports
    assert not (workers[0] & workers[1]) and not (workers[1] & workers[2]) and not (workers[0] & workers[2])
    assert not set(ports) & set().union(*workers)
    assert [n.resources for n in layout.nodes] == [{"api": 100}, {"models": 100}, {"harvest": 100}]


def test_the_nodes_run_with_the_production_settings_and_rays_token(tmp_path: Path) -> None:
    layout = Layout.from_env({"ACS_REHEARSAL_STATE_DIR": str(tmp_path), "ACS_REHEARSAL_HTTP_PORT": "8690"})
    env = node_environment(layout)
    assert env.items() >= serve_environment().items()
    assert (env["ACS_ENVIRONMENT"], env["ACS_PROFILE"], env["RAY_AUTH_MODE"]) == ("production", "cluster", "token")
    assert env["ACS_PUBLIC_BASE_URL"] == "http://127.0.0.1:8690"
    assert env["ACS_REDIS_URL"] == "redis://127.0.0.1:6379/7"
    assert len(env["RAY_AUTH_TOKEN"]) == 64 and (tmp_path / "secrets.json").stat().st_mode & 0o777 == 0o600
    assert node_environment(layout)["RAY_AUTH_TOKEN"] == env["RAY_AUTH_TOKEN"]  # kept for status and down


def test_up_refuses_a_port_that_another_process_listens_on(tmp_path: Path) -> None:
    """Serve's proxy shares a port (SO_REUSEPORT) without a word, so `up` looks first."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        layout = Layout.from_env({"ACS_REHEARSAL_HTTP_PORT": str(port), "ACS_REHEARSAL_STATE_DIR": str(tmp_path)})
        assert port_taken(port)
        with pytest.raises(SystemExit, match=f"Port {port} is in use by another process"):
            up(layout)
    assert not port_taken(port)
    assert not (tmp_path / "harvests").exists()  # it refused before it made anything


def test_the_client_port_is_outside_rays_default_worker_ports() -> None:
    assert not 10002 <= Layout().client_port <= 19999
