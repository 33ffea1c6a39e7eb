"""The Ray Serve ingress: the FastAPI app, wired to the model deployments."""
from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from ray import serve

from api.app import create_app
from api.inference.clients import HandleEngineClient
from api.services import Services, build_gateways, build_ledger
from api.settings import get_settings


def build_services(model_handles: dict[str, Any], profile: str) -> Services:
    from cluster.catalog import load_catalog
    from api.idempotency import Idempotency
    from api.traffic.limits import traffic_from_settings
    from ledger.db import database_url_from_env, make_engine

    settings = get_settings()
    catalog = load_catalog(profile)
    clients = {model_id: HandleEngineClient(handle, model_id) for model_id, handle in model_handles.items()}
    sessions, ledger = build_ledger(settings, make_engine(settings.database_url or database_url_from_env()))
    return Services(settings=settings, catalog=catalog, gateways=build_gateways(settings, clients),
                    sessions=sessions, ledger=ledger, traffic=traffic_from_settings(settings.redis_url),
                    idempotency=Idempotency(sessions))


# Late-bound app: Serve pickles an app given to the decorator, so state set
# on a module-level app would never reach the replica's copy.
@serve.deployment
@serve.ingress()
class Ingress:
    async def __init__(self, model_handles: dict[str, Any], profile: str, runner: Any = None) -> None:
        self.services = build_services(model_handles, profile)
        self.runner = runner  # the background Runner's handle (Jobs run there, not here)
        # Load each tokenizer now, not on the first request (it imports transformers).
        for model in self.services.served_models():
            self.services.tokenizers.get(model)
        # Renew this replica's Holds; release those of replicas that died.
        self.services.ledger.leases.start()

    def __serve_build_asgi_app__(self) -> FastAPI:
        app = create_app()
        app.state.services = self.services
        return app
