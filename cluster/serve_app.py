"""The Serve application: one deployment per served model, the Runner and the ingress; or,
for a colocated profile, the ingress alone, hosting them all.

`serve run cluster.serve_app:app` serves the profile named by ACS_PROFILE;
`serve run cluster.serve_app:build profile=gpu` names it explicitly.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray import serve
from ray.serve import Application

if TYPE_CHECKING:
    from deployments.catalog import AutoscalingSpec, Catalog, ModelSpec
    from domain.settings import Settings

INGRESS_CPUS = 0.25
RUNNER_CPUS = 0.1
# Serve's default (5) would queue requests in the proxy; the API's own limits
# (per-key line, per-model in-flight cap) decide admission instead.
INGRESS_MAX_ONGOING = 2000
# A replica that hosts an engine: a start on a cold GPU loads the weights, so the
# constructor gets room, and a stop gives the engine's requests their grace.
ENGINE_REPLICA_TIMES = {"health_check_period_s": 10, "health_check_timeout_s": 60, "graceful_shutdown_timeout_s": 30}


def replica_count(scaling: AutoscalingSpec) -> dict[str, Any]:
    """Autoscaling when the catalog allows a range; a fixed count (no metrics to collect) otherwise."""
    if scaling.min_replicas == scaling.max_replicas:
        return {"num_replicas": scaling.min_replicas}
    return {"autoscaling_config": scaling.model_dump(exclude_none=True)}


def model_deployment(spec: ModelSpec) -> Application:
    from deployments.boot import deployment_name
    from deployments.model_server import KEEP_WARM_PLACES, ModelServer

    return serve.deployment(ModelServer).options(
        name=deployment_name(spec.id),
        **replica_count(spec.autoscaling),
        ray_actor_options=spec.ray_actor_options.model_dump(),
        # The API's own in-flight cap per model is 100: Serve must not cap lower, and
        # the warm windows' keep_warm calls come on top of it.
        max_ongoing_requests=100 + KEEP_WARM_PLACES, **ENGINE_REPLICA_TIMES,
    ).bind(spec.model_dump(by_alias=True))


def runner_deployment(handles: dict[str, Application], profile: str, grace_s: float) -> Application:
    from cluster.composition import runner_replica
    from deployments.runner_server import STOP_MARGIN_S, RunnerServer

    # The Runner runs background work (Jobs) and the platform's operations (the
    # spend, the warm windows' floor): one replica, so they run once. It takes
    # no HTTP, and the ingress holds its handle only so that Serve deploys it.
    return serve.deployment(RunnerServer).options(
        name="runner", num_replicas=1, ray_actor_options={"num_cpus": RUNNER_CPUS},
        # A planned stop gives running work its grace (ACS_RUNNER_GRACE_S), then queues it again and
        # releases its Holds. Serve kills the replica when this timeout ends, counted from the stop's
        # start (its own wait for the replica's calls, 2 s, comes first): a kill within the grace or the
        # requeue's writes would leave the work `running` until its lease lapsed, and a Playground Run
        # would then fail instead of running again. So the grace and the stop's margin, whatever the
        # grace is set to (30 s at the default grace of 10 s).
        graceful_shutdown_timeout_s=grace_s + STOP_MARGIN_S, health_check_period_s=10, health_check_timeout_s=30,
    ).bind(handles, profile, runner_replica)


def build_application(profile: str, settings: Settings | None = None) -> Application:
    """`settings`: the caller's, read once (cluster/embedded.py); else this process's environment's."""
    from domain.settings import get_settings
    from deployments.catalog import load_catalog

    settings = settings or get_settings()
    catalog = load_catalog(profile, models_root=settings.models_dir)
    if catalog.colocate:
        return colocated_application(catalog, profile)
    from api.ingress import Ingress
    from cluster.composition import ingress_replica

    handles = {model_id: model_deployment(spec) for model_id, spec in catalog.models.items()}
    return Ingress.options(
        name="ingress", ray_actor_options={"num_cpus": INGRESS_CPUS}, max_ongoing_requests=INGRESS_MAX_ONGOING,
    ).bind(handles, profile, ingress_replica, runner_deployment(handles, profile, settings.runner_grace_s))


def colocated_application(catalog: Catalog, profile: str) -> Application:
    """One deployment: the ingress's replica hosts the models' engines and the Runner
    (deployments/catalog.py, `colocate`), and so asks for their resources and their start's time."""
    from api.ingress import Ingress
    from cluster.composition import colocated_replica

    models = [spec.ray_actor_options for spec in catalog.models.values()]
    resources = {"num_cpus": INGRESS_CPUS + RUNNER_CPUS + sum(options.num_cpus for options in models),
                 "num_gpus": sum(options.num_gpus for options in models)}
    return Ingress.options(
        name="ingress", num_replicas=1, ray_actor_options=resources, max_ongoing_requests=INGRESS_MAX_ONGOING,
        **ENGINE_REPLICA_TIMES,
    ).bind({}, profile, colocated_replica)


def build(args: dict[str, str]) -> Application:
    from domain.settings import get_settings

    settings = get_settings()
    return build_application(args.get("profile", settings.profile), settings)


def __getattr__(name: str) -> Any:
    # `serve run cluster.serve_app:app` builds on first access, not on import.
    if name == "app":
        return build({})
    raise AttributeError(name)
