"""The FastAPI application of the ingress."""
from __future__ import annotations

import json
from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse

from api.account.access_router import router as account_access_router
from api.account.csrf import require_csrf
from api.account.router import router as account_router
from api.admin.router import router as admin_router
from api.completions.router import router as completions_router
from api.errors_http import UnexpectedErrorMiddleware, install_error_handlers
from api.harvests.files import router as harvest_files_router
from api.harvests.router import router as harvests_router
from api.health.router import router as health_router
from api.jobs.router import router as jobs_router
from api.looms.router import router as looms_router
from api.metrics.middleware import RequestMetricsMiddleware
from api.metrics.router import router as metrics_router
from api.middleware import GzipJsonMiddleware, RequestIdMiddleware
from api.models.router import router as models_router
from api.security_headers import SecurityHeadersMiddleware
from api.server_timing import ServerTimingMiddleware
from api.webapp.not_found import AppNotFound
from api.webapp.router import Shell, webapp_router

SPEC = Path(__file__).with_name("openapi.json")
EXPOSED_HEADERS = [
    "X-Request-Id", "Retry-After", "retry-after-ms", "X-Should-Retry", "X-Acs-Max-Tokens-Clamped",
    "Location", "Allow", "X-Acs-Longpoll", "X-Acs-Harvest-Progress", "Server-Timing",
]


def create_app() -> FastAPI:
    app = FastAPI(title="ACS Base-model API", openapi_url=None, docs_url=None, redoc_url=None)
    shell = Shell.read()  # once: the pages and the App's "Page not found" serve the same text and policy
    install_error_handlers(app, not_found_page=AppNotFound(shell))
    for router in (completions_router, jobs_router, looms_router, harvests_router, models_router, health_router, harvest_files_router,
                   metrics_router, admin_router):
        app.include_router(router)
    # The App's JSON routes: every one that changes something checks the CSRF token first.
    for router in (account_access_router, account_router):
        app.include_router(router, dependencies=[Depends(require_csrf)])
    app.include_router(webapp_router(shell))  # the App's pages and their static files

    @app.get("/openapi.json")
    async def openapi() -> JSONResponse:
        return JSONResponse(json.loads(SPEC.read_text()))

    # Outermost last: the request id wraps everything, CORS answers errors too.
    app.add_middleware(UnexpectedErrorMiddleware)
    app.add_middleware(RequestMetricsMiddleware)  # outside the 500 handler: it counts that answer too
    app.add_middleware(GzipJsonMiddleware)
    app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["*"], allow_headers=["*"],
                       expose_headers=EXPOSED_HEADERS, allow_credentials=False)
    app.add_middleware(SecurityHeadersMiddleware)  # on every answer, the 500s and CORS preflights too
    app.add_middleware(ServerTimingMiddleware)  # inside the request id, outside everything else
    app.add_middleware(RequestIdMiddleware)
    return app
