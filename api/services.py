"""What the routes work with, built once per ingress replica."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from api import errors
from api.inference.breaker import CircuitBreaker
from api.inference.clients import EngineClient
from api.inference.gateway import ModelGateway
from api.settings import Settings
from api.tokenizers import TokenizerRegistry

MODEL_NOT_FOUND = "The model `{name}` does not exist. The API serves {ids}."


@dataclass
class Services:
    settings: Settings
    catalog: Any  # cluster.catalog.Catalog
    gateways: dict[str, ModelGateway]
    sessions: Any  # async_sessionmaker of the ledger
    ledger: Any  # api.budget.TokenLedger
    traffic: Any  # api.traffic.limits.Traffic
    idempotency: Any  # api.idempotency.Idempotency
    tokenizers: TokenizerRegistry = field(default_factory=TokenizerRegistry)
    started_at: float = field(default_factory=time.time)

    def served_models(self) -> list[Any]:
        return list(self.catalog.models.values())

    def resolve_model(self, name: str | None) -> Any:
        model = self.catalog.resolve(name)
        if model is None:
            ids = ", ".join(self.catalog.models)
            raise errors.ModelNotFound(MODEL_NOT_FOUND.format(name=name, ids=ids), "model")
        return model


def build_ledger(settings: Settings, engine: Any) -> tuple[Any, Any]:
    """Read sessions, and the ledger whose money transactions lock what they touch."""
    from api.budget import TokenLedger
    from ledger.db import session_factory

    sessions = session_factory(engine)
    # On SQLite, IMMEDIATE takes the write lock at BEGIN: its SELECT ... FOR UPDATE.
    write_sessions = session_factory(engine.execution_options(sqlite_begin="IMMEDIATE"))
    ledger = TokenLedger(sessions, write_sessions, request_url=settings.budget_request_url,
                         default_allowance=settings.monthly_allowance, lease_s=settings.hold_lease_s)
    return sessions, ledger


def build_gateways(settings: Settings, clients: dict[str, EngineClient]) -> dict[str, ModelGateway]:
    return {
        model_id: ModelGateway(
            model_id, client, chunk_timeout_s=settings.engine_timeout_s,
            max_in_flight=settings.max_in_flight_per_model,
            breaker=CircuitBreaker(settings.breaker_failures, settings.breaker_open_s),
        )
        for model_id, client in clients.items()
    }
