"""The composition root: the one place that builds the services.

The ingress replica (`ingress_replica`, or `colocated_replica` where it hosts the
engines and the Runner too), the Runner's replica (`runner_replica`) and the tests
(`compose`) all build through here, so each part is wired once. The background
kinds are registered here too (`handlers`): the Runner imports no handler.

Nothing is changed after it is built: what a part needs is handed to it when it
is made. Where two parts would each need the other first (the routes' services
tell the Runner beside them of new work; the Runner runs it with those services),
a doorbell built before both joins them (`services_with_runner`).
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from domain.budget import TokenLedger
from domain.completions.admission import Admission
from domain.feedback import notes as feedback_notes
from domain.feeds import Feed, feed_of
from domain.harvests.long_polls import LongPolls
from domain.idempotency import Idempotency
from domain.inference.breaker import CircuitBreaker
from domain.inference.clients import EngineClient, HandleEngineClient, LocalEngineClient
from domain.inference.gateway import ModelGateway
from domain.mail import mailer_of, team_mail_of
from domain.metrics.counts import Counts, counts_from_settings
from domain.metrics.line import MeteredKeyLine
from domain.metrics.scrape import LedgerReadings
from domain.services import IngressReplica, Services, no_runner_here
from domain.settings import Settings, get_settings
from domain.tokenizers import TokenizerRegistry
from domain.traffic.limits import Traffic, TrafficSettings, traffic_from_settings
from deployments.background.doorbell import Doorbell
from deployments.background.kinds import WorkHandler
from deployments.background.runner import Runner, RunnerTimes
from deployments.catalog import Catalog, load_catalog
from deployments.operations import DeploymentRef, build_operations, serve_replica_counter
from deployments.resident import Background, Colocated
from deployments.runner_server import RunnerNudge
from harvest.storage import HarvestStorage
from ledger.accounts.mail import Mailer
from ledger.store.coltypes import utcnow
from ledger.store.db import make_engine, session_factory
from ledger.work.tables import WorkKind

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle


def build_ledger(settings: Settings, db_engine: AsyncEngine) -> tuple[async_sessionmaker[AsyncSession], TokenLedger]:
    """Read sessions, and the ledger whose money transactions lock what they touch."""
    sessions = session_factory(db_engine)
    ledger = TokenLedger(sessions, write_sessions_of(db_engine), request_url=settings.budget_request_url,
                         default_allowance=settings.monthly_allowance, lease_s=settings.hold_lease_s)
    return sessions, ledger


def write_sessions_of(db_engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
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


def build_traffic(settings: Settings, traffic_settings: TrafficSettings | None = None) -> Traffic:
    """The traffic limits, in Redis where the settings name it, with each per-key line metered:
    /metrics shows the lines' lengths (domain/metrics/line.py)."""
    traffic = traffic_from_settings(settings.redis_url, traffic_settings)
    return dataclasses.replace(traffic, key_line=MeteredKeyLine(traffic.key_line))


def compose(settings: Settings, catalog: Catalog, clients: dict[str, EngineClient], db_engine: AsyncEngine, *,
            tokenizers: TokenizerRegistry | None = None, counts: Counts | None = None,
            clock: Callable[[], datetime] = utcnow, harvest_storage: HarvestStorage | None = None,
            mailer: Mailer | None = None, traffic_settings: TrafficSettings | None = None,
            wake_runner: Callable[[WorkKind], None] = no_runner_here, feed: Feed | None = None) -> Services:
    """Every service of one process, over its engine clients and its ledger database.

    `wake_runner` is told the kind of work that the routes queue: a Runner's handle in Serve
    (`RunnerNudge`), the doorbell of a Runner beside the routes (`services_with_runner`); by
    default no one, and the Runners' poll finds the work.

    `counts`, where given, is where this process's answers and tokens are counted instead of
    the settings' tally: tests give each in-process stack its own, so that no other stack's
    counts land in a test's figures. Tests give their own `clock` too, a `harvest_storage`
    of their own instead of ACS_HARVEST_STORAGE's, a `mailer` instead of the settings' and
    other traffic limits (`traffic_settings`) than the spec's. A test's Runner that stands for
    another process shares the routes' `feed`, as Redis would join them."""
    sessions, ledger = build_ledger(settings, db_engine)
    traffic = build_traffic(settings, traffic_settings)
    # With Redis every process (each ingress replica, the Runner) adds its counts there, over the traffic's client.
    counts = counts or counts_from_settings(settings, traffic.redis_client)
    # The same for what grows: the Runner publishes a Node's text there, the streams of every replica hear it.
    feed = feed or feed_of(traffic.redis_client)
    tokenizers = tokenizers or TokenizerRegistry()
    admission = Admission(ledger, traffic, tokenizers, sessions, engine_wait_s=settings.engine_timeout_s,
                          counts=counts)
    return Services(settings=settings, catalog=catalog, gateways=build_gateways(settings, clients),
                    sessions=sessions, ledger=ledger, traffic=traffic, idempotency=Idempotency(sessions),
                    admission=admission, long_polls=LongPolls(),
                    harvest_storage=harvest_storage or HarvestStorage(settings.harvest_storage),
                    metrics_readings=LedgerReadings(sessions, settings.metrics_ledger_cache_s,
                                                    settings.health_timeout_s), feed=feed,
                    tokenizers=tokenizers, work_kinds=[handler_type.kind for handler_type in handler_types()],
                    counts=counts, mailer=mailer or mailer_of(settings), clock=clock, wake_runner=wake_runner)


def handler_types() -> list[type[WorkHandler]]:
    """The kinds of background work this platform runs: one handler class each."""
    from domain.harvests.handler import HarvestHandler
    from domain.jobs.handler import JobHandler
    from domain.looms.handler import NodeHandler
    from domain.playground.handler import RunHandler

    return [JobHandler, NodeHandler, HarvestHandler, RunHandler]


def handlers(services: Services) -> list[WorkHandler]:
    from domain.harvests.handler import HarvestHandler, RayRuns
    from domain.jobs.handler import JobHandler
    from domain.looms.handler import NodeHandler
    from domain.playground.handler import RunHandler

    # A harvest's GPU runs are the Ray cluster's detached actors.
    return [JobHandler(services), NodeHandler(services), HarvestHandler(services, RayRuns()), RunHandler(services)]


def runner_times(settings: Settings) -> RunnerTimes:
    return RunnerTimes(lease_s=settings.runner_lease_s, poll_s=settings.runner_poll_s,
                       grace_s=settings.runner_grace_s, housekeeping_s=settings.runner_housekeeping_s)


def build_runner(services: Services, doorbell: Doorbell | None = None) -> Runner:
    """A Runner of every kind over `services`; `doorbell` where routes beside it announce their work.
    Its housekeeping also retries the Feedback notes' Linear issues and ends the GPU runs of the
    harvests that ended (their results are in the ledger; nothing reads the runs again)."""
    from domain.harvests.closing import close_ended_runs
    from domain.harvests.handler import RayRuns

    return Runner(services.ledger, handlers(services), list(services.catalog.models),
                  runner_times(services.settings), mailer=services.mailer, doorbell=doorbell,
                  housekeepers=[functools.partial(feedback_notes.retry_linear, services),
                                functools.partial(close_ended_runs, services.sessions, RayRuns())])


def services_with_runner(settings: Settings, catalog: Catalog, clients: dict[str, EngineClient],
                         db_engine: AsyncEngine, *, tokenizers: TokenizerRegistry | None = None,
                         counts: Counts | None = None) -> tuple[Services, Runner]:
    """Services and a Runner beside them in one process (`tokenizers`, `counts`: as compose's).

    The doorbell comes first: the services ring it when a route queues work, and the Runner,
    built over those services, waits on it. So neither is changed once the other exists."""
    doorbell = Doorbell()
    services = compose(settings, catalog, clients, db_engine, tokenizers=tokenizers, counts=counts,
                       wake_runner=doorbell.ring)
    return services, build_runner(services, doorbell)


# -- the Serve replicas: bound by reference (cluster/serve_app.py), called in the replica -----------
# Each reads the settings of its replica's environment once, and hands them down.

def ingress_replica(model_handles: dict[str, DeploymentHandle], profile: str,
                    runner_handle: DeploymentHandle | None = None) -> IngressReplica:
    """An ingress replica over the models' deployments; the routes nudge the Runner's replica
    (through `runner_handle`) when they queue work."""
    settings = get_settings()
    catalog = load_catalog(profile, models_root=settings.models_dir)
    services = compose(settings, catalog, handle_clients(model_handles), make_engine(settings.ledger_url()),
                       wake_runner=RunnerNudge(runner_handle) if runner_handle is not None else no_runner_here)
    _load_tokenizers(services)
    return IngressReplica(services)


def colocated_replica(model_handles: dict[str, DeploymentHandle], profile: str,
                      runner_handle: DeploymentHandle | None = None) -> IngressReplica:
    """A colocated profile's ingress replica: the models' engines, the Runner and the operations
    run in this process, over the same services as the routes (`model_handles` is empty, and
    there is no Runner's replica: `runner_handle` is None)."""
    from ray import serve

    from deployments.vllm_engine import VllmEngine

    settings = get_settings()
    catalog = load_catalog(profile, models_root=settings.models_dir)
    engines = {model_id: VllmEngine(spec.weights_path(), spec.vllm_args(), cpu=spec.on_cpu)
               for model_id, spec in catalog.models.items()}
    db_engine = make_engine(settings.ledger_url())
    clients: dict[str, EngineClient] = {model_id: LocalEngineClient(engine) for model_id, engine in engines.items()}
    services, runner = services_with_runner(settings, catalog, clients, db_engine)
    _load_tokenizers(services)
    # This replica holds the engines: Serve's count of its deployment is the models' count. No
    # warm window keeps a floor (no handles): the engines live as long as the replica.
    here = serve.get_replica_context()
    replicas = {model_id: DeploymentRef(here.app_name, here.deployment) for model_id in catalog.models}
    operations = build_operations(write_sessions_of(db_engine), catalog, {}, pause_usd=settings.spend_pause_usd,
                                  sample_s=settings.spend_sample_s, count_replicas=serve_replica_counter(replicas),
                                  **_spend_warnings(settings))
    return IngressReplica(services, Colocated(list(engines.values()), Background(runner, operations)))


def runner_replica(model_handles: dict[str, DeploymentHandle], profile: str) -> Background:
    """The Runner's replica: the Runner, and beside it the spend sampler and the warm windows'
    floor, over one ledger engine. The ingress rings the Runner through `RunnerServer.wake`."""
    settings = get_settings()
    catalog = load_catalog(profile, models_root=settings.models_dir)
    db_engine = make_engine(settings.ledger_url())
    services, runner = services_with_runner(settings, catalog, handle_clients(model_handles), db_engine)
    _load_tokenizers(services)
    operations = build_operations(write_sessions_of(db_engine), catalog, model_handles,
                                  pause_usd=settings.spend_pause_usd, sample_s=settings.spend_sample_s,
                                  **_spend_warnings(settings))
    return Background(runner, operations)


def _spend_warnings(settings: Settings) -> dict[str, Any]:
    """The warn amounts of the spend, mailed to ACS_TEAM_EMAIL through the outbox that the Runner sends."""
    return {"warn_usd": tuple(sorted(settings.spend_warn_usd)), "team": team_mail_of(settings)}


def handle_clients(model_handles: dict[str, DeploymentHandle]) -> dict[str, EngineClient]:
    return {model_id: HandleEngineClient(handle, model_id) for model_id, handle in model_handles.items()}


def _load_tokenizers(services: Services) -> None:
    # Now, not on the first request: loading one imports transformers.
    for model in services.served_models():
        services.tokenizers.get(model)
