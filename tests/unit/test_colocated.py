"""A colocated profile (the embedded default): the ingress's replica hosts the models'
engines and the Runner, and lives, answers Serve's health check and stops with them.
The real engine in that replica runs in tests/e2e/test_embedded_default.py."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from deployments.catalog import CatalogError, load_catalog
from deployments.engine import EngineDead
from deployments.resident import Background, Colocated, NoResident
from domain.services import IngressReplica
from tests.fakes import FakeEngine


def test_the_embedded_default_colocates_and_the_other_profiles_do_not() -> None:
    assert load_catalog("embedded").colocate
    for profile in ("test", "gpu", "spec-programs", "slow-boot"):
        assert not load_catalog(profile).colocate, profile


def test_a_colocated_profile_refuses_a_model_that_scales(tmp_path: Path) -> None:
    profile = tmp_path / "one-process.yaml"
    profile.write_text("models: [llama-8b, smollm2-135m]\ndefault: smollm2-135m\ncolocate: true\n")
    with pytest.raises(CatalogError, match="colocate needs one fixed replica of each model; llama-8b scales"):
        load_catalog(profile)


def bound(app: Any) -> Any:
    return app._bound_deployment


def test_a_colocated_application_is_the_ingress_alone_with_the_engines_resources() -> None:
    from cluster.composition import colocated_replica
    from cluster.serve_app import ENGINE_REPLICA_TIMES, INGRESS_CPUS, RUNNER_CPUS, build_application

    deployment = bound(build_application("embedded"))
    handles, profile, build_replica = deployment.init_args
    assert (deployment.name, handles, profile, build_replica) == ("ingress", {}, "embedded", colocated_replica)
    model = load_catalog("embedded").default.ray_actor_options
    assert deployment.ray_actor_options["num_cpus"] == pytest.approx(INGRESS_CPUS + RUNNER_CPUS + model.num_cpus)
    assert deployment.ray_actor_options["num_gpus"] == model.num_gpus
    config = deployment._deployment_config
    assert config.num_replicas == 1
    assert {name: getattr(config, name) for name in ENGINE_REPLICA_TIMES} == ENGINE_REPLICA_TIMES


def test_a_profile_that_does_not_colocate_keeps_a_deployment_per_model_and_the_runner() -> None:
    from cluster.composition import ingress_replica
    from cluster.serve_app import build_application

    handles, profile, build_replica, runner = bound(build_application("test")).init_args
    assert (list(handles), profile, build_replica) == (["tiny-llama"], "test", ingress_replica)
    assert bound(handles["tiny-llama"]).name == "model-tiny-llama"
    assert bound(runner).name == "runner"


# -- what the replica hosts -----------------------------------------------------------------------------------

@dataclass
class RecordingBackground:
    calls: list[str] = field(default_factory=list)
    fail_stop: bool = False

    def start(self) -> None:
        self.calls.append("start")

    async def check_health(self) -> None:
        self.calls.append("check_health")

    async def stop(self) -> None:
        self.calls.append("stop")
        if self.fail_stop:
            raise RuntimeError("the Runner's stop failed")


async def test_colocated_parts_stop_the_runner_before_the_engines_and_the_engines_always() -> None:
    engines = [FakeEngine(), FakeEngine()]
    background = RecordingBackground(fail_stop=True)
    parts = Colocated(engines, background)  # type: ignore[arg-type]
    parts.start()
    await parts.check_health()
    with pytest.raises(RuntimeError, match="the Runner's stop failed"):
        await parts.stop()
    assert background.calls == ["start", "check_health", "stop"]
    assert all(engine.shut_down for engine in engines)


async def test_a_dead_colocated_engine_fails_the_replicas_health_check() -> None:
    class DeadEngine(FakeEngine):
        async def check_health(self) -> None:
            raise EngineDead("EngineCore died")

    background = RecordingBackground()
    with pytest.raises(EngineDead, match="EngineCore died"):
        await Colocated([FakeEngine(), DeadEngine()], background).check_health()  # type: ignore[arg-type]
    assert background.calls == []


async def test_the_background_fails_its_health_check_when_a_loop_ended() -> None:
    runner = SimpleNamespace(check_alive=lambda: None)

    def ended() -> None:
        raise RuntimeError("1 loops of the operations ended")

    with pytest.raises(RuntimeError, match="loops of the operations ended"):
        await Background(runner, SimpleNamespace(check_alive=ended)).check_health()  # type: ignore[arg-type]


async def test_the_ingress_replica_starts_checks_and_stops_what_it_hosts() -> None:
    from api.ingress import Ingress

    original = Ingress.func_or_class.__mro__[1]  # the class under Serve's ASGI wrapper
    resident = RecordingBackground()
    services = SimpleNamespace(ledger=SimpleNamespace(leases=SimpleNamespace(start=lambda: None)))
    ingress = original.__new__(original)
    await original.__init__(ingress, {}, "embedded",
                            lambda handles, profile, runner: IngressReplica(services, resident))  # type: ignore[arg-type]
    await ingress.check_health()
    await ingress.__del__()
    assert resident.calls == ["start", "check_health", "stop"]


async def test_a_replica_that_hosts_nothing_has_nothing_to_start_check_or_stop() -> None:
    resident = IngressReplica.__dataclass_fields__["resident"].default_factory()
    assert isinstance(resident, NoResident)
    resident.start()
    await asyncio.wait_for(resident.check_health(), 1)
    await asyncio.wait_for(resident.stop(), 1)
