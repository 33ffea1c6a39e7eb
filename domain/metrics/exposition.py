"""What GET /metrics answers (api/metrics/router.py): the metrics token's check, then one scrape in
Prometheus's text format.

With ACS_METRICS_TOKEN set, a scrape sends `Authorization: Bearer <token>`. Empty, the route is open:
only in development, as the settings refuse to start without a token elsewhere (domain/settings.py,
check_metrics_token).
"""
from __future__ import annotations

import asyncio
import hmac

from prometheus_client.exposition import generate_latest

from domain import errors
from domain.metrics.scrape import scrape_registry
from domain.services import Services

MISSING_TOKEN = "GET /metrics needs the metrics token: send `Authorization: Bearer <ACS_METRICS_TOKEN>`."
WRONG_TOKEN = "The metrics token is wrong: send the value of ACS_METRICS_TOKEN as `Authorization: Bearer <token>`."


async def check_metrics_token(services: Services, authorization: str | None, address: str) -> None:
    """`authorization`: the request's Authorization header; `address`: the client's, for the try limit."""
    token = services.settings.metrics_token.get_secret_value()
    if not token:
        return
    scheme, _, sent = (authorization or "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), token.encode()):
        return
    # A wrong token counts against the address as a wrong API key does: 60 a minute.
    await services.traffic.check_address(address)
    if not sent.strip():
        raise errors.MissingAuthorization(MISSING_TOKEN)
    raise errors.InvalidApiKey(WRONG_TOKEN)


async def exposition(services: Services, authorization: str | None, address: str) -> bytes:
    """The scrape, in the 0.0.4 text format: Prometheus 2 and 3 both read it, and our names need nothing newer."""
    await check_metrics_token(services, authorization, address)
    counted, ledger = await asyncio.gather(services.counts.families(), services.metrics_readings.latest())
    return generate_latest(scrape_registry(services, counted, ledger))
