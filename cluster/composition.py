"""The composition root: the one place that builds the services.

The ingress replica (`ingress_services`), the Runner replica
(`runner_for_replica`, and `operations_for_replica` beside it) and the tests
(`compose`) all build through here, so each part is wired once. The
background kinds are registered here too (`handlers`): the Runner imports no
handler.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from domain.mail import mailer_of
from domain.completions.admission import Admission
from domain.harvests.long_polls import LongPolls
from domain.idempotency import Idempotency
from domain.inference.breaker import CircuitBreaker
from domain.inference.clients import EngineClient, HandleEngineClient, LocalEngineClient
from domain.inference.gateway import ModelGateway
from domain.metrics.counts import Counts, counts_from_settings
from domain.metrics.line import MeteredKeyLine
from domain.metrics.scrape import LedgerReadings
from domain.services import Services
from domain.settings import Settings, get_settings
from domain.tokenizers import TokenizerRegistry
from domain.traffic.limits import traffic_from_settings
from deployments.background.kinds import WorkHandler
from deployments.background.runner import Runner, RunnerTimes
from deployments.catalog import Catalog, load_catalog
from deployments.operations import DeploymentRef, Operations, build_operations, serve_replica_counter
from deployments.resident import Background, Colocated
from harvest.storage import HarvestStorage
from ledger.store.coltypes import utcnow
from ledger.store.db import make_engine, session_factory


def build_ledger(settings: Settings, db_engine: Any) -> tuple[Any, Any]:
    """Read sessions, and the ledger whose money transactions lock what they touch."""
    from domain.budget import TokenLedger

    sessions = session_factory(db_engine)
    ledger = TokenLedger(sessions, write_sessions_of(db_engine), request_url=settings.budget_request_url,
                         default_allowance=settings.monthly_allowance, lease_s=settings.hold_lease_s)
    return sessions, ledger


def write_sessions_of(db_engine: Any) -> Any:
    # On SQLite, IMMEDIATE takes the write lock at BEGIN: its SELECT ... FOR UPDATE.
    return session_factory(db_engine.execution_options(sqlite_begin="IMMEDIATE"))


def build_gateways(settings: Settings, clients: dict[str, EngineClient]) -> dict[str, ModelGateway]:
    return {
        model_id: ModelGateway(
            model_id, client, chunk_timeout_s=settings.engine_timeout_s,
            max_in_flight=settings.max_in_flight_per_model,
            breaker=CircuitBreaker(settings.breaker_failures, settings.breaker_open_s),
        )
        for model_id, client in clients.items()
    }


def compose(settings: Settings, catalog: Catalog, clients: dict[str, EngineClient], db_engine: Any, *,
            tokenizers: TokenizerRegistry | None = None, counts: Counts | None = None,
            clock: Callable[[], datetime] = utcnow, harvest_storage: HarvestStorage | None = None) -> Services:
    """Every service of one process, over its engine clients and its ledger database.

    `counts`, where given, is where this process's answers and tokens are counted instead of
    the settings' tally: tests give each in-process stack its own, so that no other stack's
    counts land in a test's figures. Tests give their own `clock` too, and a `harvest_storage`
    of their own instead of ACS_HARVEST_STORAGE's."""
    sessions, ledger = build_ledger(settings, db_engine)
    traffic = traffic_from_settings(settings.redis_url)
    traffic.key_line = MeteredKeyLine(traffic.key_line)  # /metrics shows the lines' lengths
    # With Redis every process (each ingress replica, the Runner) adds its counts there, over the traffic's client.
    counts = counts or counts_from_settings(settings, traffic.redis_client)
    tokenizers = tokenizers or TokenizerRegistry()
    admission = Admission(ledger, traffic, tokenizers, sessions, engine_wait_s=settings.engine_timeout_s,
                          counts=counts)
    return Services(settings=settings, catalog=catalog, gateways=build_gateways(settings, clients),
                    sessions=sessions, ledger=ledger, traffic=traffic, idempotency=Idempotency(sessions),
                    admission=admission, long_polls=LongPolls(),
                    harvest_storage=harvest_storage or HarvestStorage(settings.harvest_storage),
                    metrics_readings=LedgerReadings(sessions, settings.metrics_ledger_cache_s,
                                                    settings.health_timeout_s),
                    tokenizers=tokenizers, work_kinds=[handler_type.kind for handler_type in handler_types()],
                    counts=counts, mailer=mailer_of(settings), clock=clock)


def handler_types() -> list[type]:
    """The kinds of background work this platform runs: one handler class each."""
    from domain.harvests.handler import HarvestHandler
    from domain.jobs.handler import JobHandler
    from domain.looms.handler import NodeHandler

    return [JobHandler, NodeHandler, HarvestHandler]


def handlers(services: Services) -> list[WorkHandler]:
    from domain.harvests.handler import HarvestHandler, RayRuns
    from domain.jobs.handler import JobHandler
    from domain.looms.handler import NodeHandler

    # A harvest's GPU runs are the Ray cluster's detached actors.
    return [JobHandler(services), NodeHandler(services), HarvestHandler(services, RayRuns())]


def runner_times(settings: Settings) -> RunnerTimes:
    return RunnerTimes(lease_s=settings.runner_lease_s, poll_s=settings.runner_poll_s,
                       grace_s=settings.runner_grace_s, housekeeping_s=settings.runner_housekeeping_s)


def build_runner(services: Services) -> Runner:
    runner = Runner(services.ledger, handlers(services), list(services.catalog.models),
                    runner_times(services.settings), mailer=services.mailer)
    # Routes that queue work in this process (tests, with the Runner beside them) nudge it directly.
    services.wake_runner = runner.wake
    return runner


# -- the Serve replicas: bound by reference (cluster/serve_app.py), called in the replica -----------

def ingress_services(model_handles: dict[str, Any], profile: str) -> Services:
    settings = get_settings()
    clients = {model_id: HandleEngineClient(handle, model_id) for model_id, handle in model_handles.items()}
    services = compose(settings, load_catalog(profile, models_root=settings.models_dir), clients, make_engine(settings.ledger_url()))
    _load_tokenizers(services)
    return services


def colocated_services(model_handles: dict[str, Any], profile: str) -> Services:
    """A colocated profile's ingress replica: the models' engines, the Runner and the operations
    run in this process, over the same services as the routes (`model_handles` is empty)."""
    from ray import serve

    from deployments.vllm_engine import VllmEngine

    settings = get_settings()
    catalog = load_catalog(profile, models_root=settings.models_dir)
    engines = {model_id: VllmEngine(spec.weights_path(), spec.vllm_args(), cpu=spec.on_cpu)
               for model_id, spec in catalog.models.items()}
    db_engine = make_engine(settings.ledger_url())
    clients = {model_id: LocalEngineClient(engine) for model_id, engine in engines.items()}
    services = compose(settings, catalog, clients, db_engine)
    _load_tokenizers(services)
    # This replica holds the engines: Serve's count of its deployment is the models' count. No
    # warm window keeps a floor (no handles): the engines live as long as the replica.
    here = serve.get_replica_context()
    replicas = {model_id: DeploymentRef(here.app_name, here.deployment) for model_id in catalog.models}
    operations = build_operations(write_sessions_of(db_engine), catalog, {}, pause_usd=settings.spend_pause_usd,
                                  sample_s=settings.spend_sample_s, count_replicas=serve_replica_counter(replicas))
    services.resident = Colocated(list(engines.values()), Background(build_runner(services), operations))
    return services


def runner_for_replica(model_handles: dict[str, Any], profile: str) -> Runner:
    return build_runner(ingress_services(model_handles, profile))


def operations_for_replica(model_handles: dict[str, Any], profile: str) -> Operations:
    """The spend sampler and the warm windows' floor, beside the Runner in its replica."""
    settings = get_settings()
    catalog = load_catalog(profile, models_root=settings.models_dir)
    return build_operations(write_sessions_of(make_engine(settings.ledger_url())), catalog, model_handles,
                            pause_usd=settings.spend_pause_usd, sample_s=settings.spend_sample_s)


def _load_tokenizers(services: Services) -> None:
    # Now, not on the first request: loading one imports transformers.
    for model in services.served_models():
        services.tokenizers.get(model)
