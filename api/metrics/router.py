"""GET /metrics: Prometheus's text format, without an API key (the token and the scrape:
domain/metrics/exposition.py)."""
from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from api.auth import services_of
from api.client_address import client_address
from domain.metrics.exposition import exposition

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    text = await exposition(services_of(request), request.headers.get("authorization"), client_address(request))
    return Response(text, media_type=CONTENT_TYPE_PLAIN_0_0_4)
