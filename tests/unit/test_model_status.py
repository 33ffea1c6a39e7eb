"""GET /v1/models/{model}/status: the boot stages from Serve's replica states and
the boot board, the fallback without a report, and never a call to a model.

Serve's details and the board are plain dicts here, in the shapes that Ray's
controller (`get_serve_instance_details`) and the replicas write; the real ones
meet in tests/e2e/test_e2e_boot.py.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from domain.inference.clients import HandleEngineClient, LocalEngineClient
from domain.inference.gateway import ModelGateway, Waits
from domain.models import FALLBACK_WARM_S, model_status
from deployments import replica_states
from deployments.boot import ReplicaReport, Start
from deployments.engine import GenerateRequest, SamplingSpec
from deployments.engine_stages import STAGE_FILE_ENV, StageWatcher, write_stage
from tests.fakes import FakeEngine
from tests.spec import validate
from tests.waiting import wait_until

T0 = 1_700_000_000.0  # the tests' clock starts here


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Reported:
    """An engine client whose report the test sets; without an engine, a call to the
    model fails the test."""

    def __init__(self, report: ReplicaReport | None, engine: FakeEngine | None = None) -> None:
        self.report, self.engine = report, engine

    async def state(self) -> ReplicaReport | None:
        return self.report

    def generate(self, request: GenerateRequest) -> Any:
        assert self.engine is not None, "the status route called the model"
        return self.engine.generate(request)


class Model:
    id = "tiny-llama"


def gateway_with(client: Any, clock: Clock | None = None) -> ModelGateway:
    return ModelGateway("tiny-llama", client, chunk_timeout_s=5.0, clock=clock or Clock())


async def status_of(gateway: ModelGateway) -> dict[str, Any]:
    status = await model_status(Model(), type("S", (), {"gateways": {"tiny-llama": gateway}})())
    validate(status, "ModelStatus")
    assert status["activation_boot"] == status["boot"]
    return status


def replica(state: str, replica_id: str = "r1", *, actor: bool = True, start_time_s: float = T0) -> dict:
    details = {"replica_id": replica_id, "state": state, "start_time_s": start_time_s}
    if actor:
        details.update(actor_id="a" * 32, pid=4242)
    return details


def entry(stage: str, container_started_at: float) -> dict:
    return {"stage": stage, "container_started_at": container_started_at, "stage_at": container_started_at + 1}


def boot(stage: str, age: int) -> dict:
    labels = {"waiting_for_gpu": "Waiting for a GPU", "container_started": "Starting the model's server",
              "weights_loading": "Loading model weights", "weights_loaded": "Preparing memory and kernels"}
    return {"stage": stage, "stage_label": labels[stage], "stage_age_s": age}


# -- Serve's replica states joined with the board ----------------------------------------------

def test_a_replica_without_an_actor_waits_for_its_gpu_since_serve_asked_for_it() -> None:
    report = replica_states.join([replica("STARTING", actor=False, start_time_s=T0 - 9)], {}, T0)
    assert report == ReplicaReport(serving=0, starts=(Start("waiting_for_gpu", T0 - 9),))


def test_an_actor_that_has_not_written_yet_has_just_started_its_container() -> None:
    report = replica_states.join([replica("STARTING")], {}, T0)
    assert report.starts == (Start("container_started", T0),)


@pytest.mark.parametrize("stage", ["container_started", "weights_loading", "weights_loaded"])
def test_a_starting_replica_has_its_boards_stage_counted_from_its_containers_start(stage: str) -> None:
    report = replica_states.join([replica("STARTING")], {"r1": entry(stage, T0 - 30)}, T0)
    assert report.starts == (Start(stage, T0 - 30),)


def test_running_replicas_serve_and_their_old_entries_say_nothing() -> None:
    replicas = [replica("RUNNING", "r1"), replica("PENDING_MIGRATION", "r2"), replica("STOPPING", "r3")]
    report = replica_states.join(replicas, {"r1": entry("weights_loaded", T0 - 90)}, T0)
    assert report == ReplicaReport(serving=2, starts=())


def test_the_start_that_got_furthest_leads() -> None:
    starts = (Start("waiting_for_gpu", T0 - 50), Start("weights_loading", T0 - 5),
              Start("weights_loaded", T0 - 3), Start("weights_loaded", T0 - 8))
    assert ReplicaReport(serving=0, starts=starts).leading_start() == Start("weights_loaded", T0 - 8)
    assert ReplicaReport(serving=1).leading_start() is None


def test_the_report_reads_the_board_before_serve_and_erases_entries_of_gone_replicas(monkeypatch) -> None:
    calls: list[str] = []
    board = {"r1": entry("weights_loading", T0 - 5), "dead": entry("weights_loading", T0 - 500)}

    def read_board(app: str, deployment: str) -> dict:
        calls.append(f"board {app}/{deployment}")
        return board

    def serve_replicas(app: str, deployment: str) -> list[dict]:
        calls.append(f"serve {app}/{deployment}")
        return [replica("STARTING", "r1")]

    monkeypatch.setattr(replica_states, "read_board", read_board)
    monkeypatch.setattr(replica_states, "serve_replicas", serve_replicas)
    monkeypatch.setattr(replica_states, "erase", lambda app, deployment, ids: calls.append(f"erase {sorted(ids)}"))
    report = replica_states.replica_report("acs", "model-tiny-llama")
    assert calls == ["board acs/model-tiny-llama", "serve acs/model-tiny-llama", "erase ['dead']"]
    assert report == ReplicaReport(serving=0, starts=(Start("weights_loading", T0 - 5),))


def test_a_deployment_that_serve_does_not_list_has_no_report(monkeypatch) -> None:
    monkeypatch.setattr(replica_states, "read_board", lambda app, deployment: {})
    monkeypatch.setattr(replica_states, "serve_replicas", lambda app, deployment: None)
    assert replica_states.replica_report("acs", "model-tiny-llama") is None


def test_outside_ray_there_is_no_report() -> None:
    # In a process of its own: the e2e tier of the same session may have started Ray in this one.
    program = ("import ray\n"
               "from deployments import replica_states\n"
               "assert not ray.is_initialized()\n"
               "assert replica_states.replica_report('acs', 'model-tiny-llama') is None\n"
               "assert not ray.is_initialized()  # reading started no Ray either\n"
               "print('no report')\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and done.stdout.strip() == "no report", done.stderr[-2000:]


# -- the status from a report ----------------------------------------------------------------------

async def test_a_serving_model_is_warm_without_a_boot() -> None:
    status = await status_of(gateway_with(Reported(ReplicaReport(serving=1))))
    assert status == {"id": "tiny-llama", "object": "model.status", "warm": True, "boot": None,
                      "activation_boot": None}


async def test_a_starting_replica_shows_its_stage_and_its_age() -> None:
    gateway = gateway_with(Reported(ReplicaReport(0, (Start("weights_loading", T0 - 402),))))
    status = await status_of(gateway)
    assert (status["warm"], status["boot"]) == (False, boot("weights_loading", 402))


async def test_a_warm_model_can_start_a_second_container() -> None:
    gateway = gateway_with(Reported(ReplicaReport(1, (Start("weights_loaded", T0 - 61),))))
    status = await status_of(gateway)
    assert (status["warm"], status["boot"]) == (True, boot("weights_loaded", 61))


async def test_a_request_without_a_replica_waits_for_a_gpu_from_its_own_start() -> None:
    """Scaled to zero: Serve lists no replica until its autoscaler answers the request."""
    clock = Clock()
    gateway = gateway_with(Reported(ReplicaReport(serving=0), FakeEngine(first_delay_s=30)), clock)
    task = asyncio.create_task(first_output(gateway))
    await wait_until(lambda: gateway.waiting_since is not None)
    clock.now += 7
    assert (await status_of(gateway))["boot"] == boot("waiting_for_gpu", 7)
    # Serve's replica waits for its resources: the age still counts from the request.
    gateway.client.report = ReplicaReport(0, (Start("waiting_for_gpu", T0 + 2),))
    assert (await status_of(gateway))["boot"] == boot("waiting_for_gpu", 7)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert gateway.waiting_since is None


async def test_a_replica_asked_for_by_another_process_waits_since_serve_asked() -> None:
    gateway = gateway_with(Reported(ReplicaReport(0, (Start("waiting_for_gpu", T0 - 12),))))
    assert (await status_of(gateway))["boot"] == boot("waiting_for_gpu", 12)


async def test_a_serving_model_has_no_gpu_to_wait_for() -> None:
    gateway = gateway_with(Reported(ReplicaReport(1, (Start("waiting_for_gpu", T0 - 12),))))
    status = await status_of(gateway)
    assert (status["warm"], status["boot"]) == (True, None)


async def test_a_cold_model_with_nothing_waiting_has_no_boot() -> None:
    status = await status_of(gateway_with(Reported(ReplicaReport(serving=0))))
    assert (status["warm"], status["boot"]) == (False, None)


async def test_an_engine_in_this_process_reports_itself() -> None:
    engine = FakeEngine()
    status = await status_of(gateway_with(LocalEngineClient(engine)))
    assert (status["warm"], status["boot"]) == (True, None)
    engine.shutdown()
    assert (await status_of(gateway_with(LocalEngineClient(engine))))["warm"] is False


# -- no report: the fallback -----------------------------------------------------------------------

class Unreported(LocalEngineClient):
    """A real engine's answers without a report, as when Ray's state cannot be read."""

    async def state(self) -> None:
        return None


async def first_output(gateway: ModelGateway, max_tokens: int = 1) -> None:
    request = GenerateRequest("req-1", [1, 2, 3], SamplingSpec(max_tokens=max_tokens))
    async for _ in gateway.stream(request, Waits(first_s=60)):
        pass


async def test_without_a_report_a_model_is_warm_for_five_minutes_after_an_answer() -> None:
    clock = Clock()
    gateway = gateway_with(Unreported(FakeEngine()), clock)
    assert (await status_of(gateway))["warm"] is False  # never answered
    await first_output(gateway, max_tokens=3)
    assert gateway.last_answered_at == T0
    clock.now = T0 + FALLBACK_WARM_S - 1
    status = await status_of(gateway)
    assert (status["warm"], status["boot"]) == (True, None)
    clock.now = T0 + FALLBACK_WARM_S
    status = await status_of(gateway)
    assert (status["warm"], status["boot"]) == (False, None)


async def test_without_a_report_a_failed_answer_keeps_nothing_warm() -> None:
    gateway = gateway_with(Unreported(FakeEngine(fail_after_tokens=1)))
    with pytest.raises(Exception):
        await first_output(gateway, max_tokens=3)
    assert gateway.last_answered_at is None
    assert (await status_of(gateway))["warm"] is False


async def test_without_a_report_a_waiting_request_waits_for_a_gpu() -> None:
    clock = Clock()
    gateway = gateway_with(Unreported(FakeEngine(first_delay_s=30)), clock)
    task = asyncio.create_task(first_output(gateway))
    await wait_until(lambda: gateway.waiting_since is not None)
    clock.now += 4
    status = await status_of(gateway)
    assert (status["warm"], status["boot"]) == (False, boot("waiting_for_gpu", 4))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert (await status_of(gateway))["boot"] is None


async def test_without_a_report_a_request_on_a_warm_model_waits_for_no_gpu() -> None:
    clock = Clock()
    engine = FakeEngine()
    gateway = gateway_with(Unreported(engine), clock)
    await first_output(gateway)
    engine.first_delay_s = 30
    task = asyncio.create_task(first_output(gateway))
    await wait_until(lambda: gateway.waiting_since is not None)
    status = await status_of(gateway)
    assert (status["warm"], status["boot"]) == (True, None)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


# -- the route never starts a replica ------------------------------------------------------------------

class Handle:
    """A DeploymentHandle that records every call; the route may read only its names."""

    app_name, deployment_name = "acs", "model-tiny-llama"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        raise AssertionError(f"the status route used the handle's {name}")


@pytest.mark.parametrize("report", [None, ReplicaReport(serving=0),
                                    ReplicaReport(0, (Start("waiting_for_gpu", T0),))])
async def test_the_route_reads_replica_states_and_never_calls_the_model(fake_stack, monkeypatch, report) -> None:
    seen: list[tuple[str, str]] = []

    def replica_report(app: str, deployment: str) -> ReplicaReport | None:
        seen.append((app, deployment))
        return report

    monkeypatch.setattr(replica_states, "replica_report", replica_report)
    handle = Handle()
    gateway = fake_stack.services.gateways["tiny-llama"]
    monkeypatch.setattr(gateway, "client", HandleEngineClient(handle, "tiny-llama"))
    response = await fake_stack.http.get("/v1/models/tiny-llama/status", headers=fake_stack.auth())
    assert response.status_code == 200, response.text
    validate(response.json(), "ModelStatus")
    assert response.json()["warm"] is False
    assert seen == [("acs", "model-tiny-llama")] and handle.calls == []


async def test_a_report_that_takes_too_long_is_no_report(monkeypatch) -> None:
    import time

    from domain.inference import clients

    monkeypatch.setattr(clients, "REPORT_TIMEOUT_S", 0.05)
    monkeypatch.setattr(replica_states, "replica_report", lambda app, deployment: time.sleep(0.5))
    assert await HandleEngineClient(Handle(), "tiny-llama").state() is None


# -- the engine's own stages, from its worker processes --------------------------------------------

def test_the_watcher_forwards_each_stage_that_a_worker_writes(tmp_path) -> None:
    seen: list[str] = []
    watcher = StageWatcher(seen.append, folder=tmp_path)
    before = os.environ.get(STAGE_FILE_ENV)
    with watcher.watching():
        assert os.environ[STAGE_FILE_ENV] == str(watcher.path)
        write_stage("weights_loading")
        watcher.poll()
        write_stage("weights_loading")  # the same stage again says nothing new
        write_stage("weights_loaded")
    assert seen == ["weights_loading", "weights_loaded"]
    assert os.environ.get(STAGE_FILE_ENV) == before
    assert list(tmp_path.iterdir()) == []  # no stage file stays behind


def test_a_worker_without_a_watcher_writes_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(STAGE_FILE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    write_stage("weights_loading")
    assert list(tmp_path.iterdir()) == []


def test_vllms_workers_report_the_edges_of_their_model_load(tmp_path, monkeypatch) -> None:
    from vllm.v1.worker.worker_base import WorkerWrapperBase

    import deployments.worker_extension  # noqa: F401 - vLLM imports it in each worker

    class Worker:
        def __init__(self) -> None:
            self.seen: list = []

        def load_model(self, **kwargs: Any) -> str:
            self.seen.append((path.read_text() if path.exists() else None, kwargs))
            return "loaded"

    path = tmp_path / "stage.json"
    monkeypatch.setenv(STAGE_FILE_ENV, str(path))
    first, other = WorkerWrapperBase(rpc_rank=0), WorkerWrapperBase(rpc_rank=1)
    first.worker, other.worker = Worker(), Worker()
    assert first.load_model(load_dummy_weights=False) == "loaded"
    assert '"weights_loading"' in first.worker.seen[0][0] and first.worker.seen[0][1] == {"load_dummy_weights": False}
    assert '"weights_loaded"' in path.read_text()
    path.unlink()
    other.load_model()
    assert not path.exists()  # one report for all the GPUs of a tensor-parallel engine


# -- keep_warm and the idle windows ---------------------------------------------------------------

async def test_keep_warm_stays_open_for_its_seconds_without_the_engine() -> None:
    from deployments.model_server import ModelServer

    server = ModelServer.__new__(ModelServer)  # no engine at all: keep_warm runs none
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await server.keep_warm(0.2) is None
    assert 0.2 <= loop.time() - started < 1.0


def test_keep_warm_takes_no_place_of_the_apis_in_flight_cap() -> None:
    from domain.settings import Settings
    from cluster.serve_app import model_deployment
    from deployments.catalog import load_catalog
    from deployments.model_server import KEEP_WARM_PLACES

    config = model_deployment(load_catalog("gpu").models["llama-8b"])._bound_deployment._deployment_config
    assert KEEP_WARM_PLACES >= 1
    assert config.max_ongoing_requests == Settings().max_in_flight_per_model + KEEP_WARM_PLACES


@pytest.mark.parametrize("model_id, idle_s", [("llama-8b", 30 * 60), ("llama-405b", 5 * 60),
                                              ("trinity-truebase", 5 * 60)])
def test_gpu_models_scale_to_zero_after_the_specs_idle_window(model_id: str, idle_s: int) -> None:
    from ray.serve.config import AutoscalingConfig

    from cluster.serve_app import replica_count
    from deployments.catalog import load_catalog

    scaling = load_catalog("gpu").models[model_id].autoscaling
    assert (scaling.min_replicas, scaling.initial_replicas) == (0, 0)
    assert scaling.downscale_to_zero_delay_s == idle_s
    config = AutoscalingConfig(**replica_count(scaling)["autoscaling_config"])  # Ray's own check
    assert (config.min_replicas, config.downscale_to_zero_delay_s) == (0, idle_s)


@pytest.mark.parametrize("profile", ["embedded", "test"])
def test_the_cpu_defaults_stay_warm_on_a_fixed_replica(profile: str) -> None:
    from cluster.serve_app import replica_count
    from deployments.catalog import load_catalog

    catalog = load_catalog(profile)
    assert replica_count(catalog.default.autoscaling) == {"num_replicas": 1}
