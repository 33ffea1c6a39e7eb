"""GET /metrics: Prometheus's text format, without an API key.

With ACS_METRICS_TOKEN set, a scrape sends `Authorization: Bearer <token>`.
Empty, the route is open: only in development, as the settings refuse to start
without a token elsewhere (domain/settings.py, check_metrics_token).
"""
from __future__ import annotations

import asyncio
import hmac
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from domain import errors
from api.auth import services_of
from api.client_address import client_address
from domain.metrics.scrape import LedgerReadings, scrape_registry

router = APIRouter()

MISSING_TOKEN = "GET /metrics needs the metrics token: send `Authorization: Bearer <ACS_METRICS_TOKEN>`."
WRONG_TOKEN = "The metrics token is wrong: send the value of ACS_METRICS_TOKEN as `Authorization: Bearer <token>`."


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    services = services_of(request)
    await check_metrics_token(request, services)
    counted, ledger = await asyncio.gather(services.counts.families(), readings_of(request.app, services).latest())
    # The 0.0.4 text format: Prometheus 2 and 3 both read it, and our names need nothing newer.
    return Response(generate_latest(scrape_registry(services, counted, ledger)),
                    media_type=CONTENT_TYPE_PLAIN_0_0_4)


async def check_metrics_token(request: Request, services: Any) -> None:
    token = services.settings.metrics_token.get_secret_value()
    if not token:
        return
    scheme, _, sent = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), token.encode()):
        return
    # A wrong token counts against the address as a wrong API key does: 60 a minute.
    await services.traffic.check_address(client_address(request))
    if not sent.strip():
        raise errors.MissingAuthorization(MISSING_TOKEN)
    raise errors.InvalidApiKey(WRONG_TOKEN)


def readings_of(app: FastAPI, services: Any) -> LedgerReadings:
    """One cache per app and its services (kept between scrapes on the app's state)."""
    readings = getattr(app.state, "metrics_readings", None)
    if readings is None or readings.sessions is not services.sessions:
        settings = services.settings
        readings = LedgerReadings(services.sessions, settings.metrics_ledger_cache_s, settings.health_timeout_s)
        app.state.metrics_readings = readings
    return readings
