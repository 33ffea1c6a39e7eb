"""Every error answers with the spec's error object: rendered here, once.

An ApiError answers as it is; any other exception is mapped by `domain.error_mapping.as_api_error`
(the refusals of the layers below: the ledger's, the engine's, a harvest link's...), else it is the
API's 500. No route or use case maps a refusal itself.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.background import BackgroundTask
from starlette.routing import Match

from domain import errors, server_errors
from domain.error_mapping import as_api_error

log = logging.getLogger("acs.api")
NOT_FOUND = "No route has the path {path}."
NOT_ALLOWED = "The route {path} does not take {method}."
INTERNAL = "The API failed while it handled the request."
# The App's account routes: there the reader is a key's owner, who gets the spec's words.
ACCOUNT_ROUTES = "/account/"


def request_id_of(request: Request) -> str | None:
    return request.scope.get("state", {}).get("request_id")


def owner_reads(request: Request) -> bool:
    """Whether the route that took the request is one of the App's account routes (as the router
    declared it: the scope's `route`), whose reader is a key's owner."""
    return getattr(request.scope.get("route"), "path", "").startswith(ACCOUNT_ROUTES)


def unexpected_response(request: Request, error: BaseException) -> JSONResponse:
    """The answer to an exception that is not an ApiError: its mapping, or the 500."""
    mapped = as_api_error(error, owner=owner_reads(request))
    if mapped is None:
        log.exception("request %s failed", request_id_of(request), exc_info=error)
        mapped = errors.InternalError(INTERNAL)
    else:
        # A refusal is the client's to fix; a mapped 5xx (the database's pool) is the API's to watch.
        level = logging.WARNING if mapped.status >= 500 else logging.INFO
        log.log(level, "request %s: %s: %s", request_id_of(request), mapped.code, error)
    return error_response(request, mapped)


def error_response(request: Request, error: errors.ApiError) -> JSONResponse:
    request_id = request_id_of(request)
    # Set here too: the last-resort handler answers outside RequestIdMiddleware.
    headers = {**error.headers(), **({"X-Request-Id": request_id} if request_id else {})}
    return JSONResponse(error.body(request_id), status_code=error.status, headers=headers,
                        background=_counted(request, error))


def _counted(request: Request, error: errors.ApiError) -> BackgroundTask | None:
    """A 5xx or a timeout counts for Analytics' Platform tab, after the answer (domain/server_errors.py)."""
    kind = server_errors.kind_of(error)
    services = getattr(request.app.state, "services", None) if "app" in request.scope else None
    return None if kind is None or services is None else BackgroundTask(server_errors.record, services, kind)


class UnexpectedErrorMiddleware:
    """Answers an unexpected exception with the 500 error object.

    It sits inside CORS and gzip, unlike Starlette's last-resort handler, so
    a browser can read this answer too. After the answer started (a stream)
    nothing can be sent; the exception goes on to the server.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracking_send(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as error:
            if started:
                raise
            await unexpected_response(Request(scope), error)(scope, receive, send)


def allowed_methods(request: Request) -> str:
    """Every method that some route of the path takes. Starlette's own 405 names only the first
    route that matched the path, and a path such as /v1/looms has a route per method."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


# A 404 that the App answers with a page of its own, or None for the API's error object.
NotFoundPage = Callable[[Request], Response | None]


def install_error_handlers(app: FastAPI, not_found_page: NotFoundPage | None = None) -> None:
    """The spec's error object for every error; a browser's miss under the App's pages gets
    `not_found_page`'s answer instead (api/webapp/not_found.py)."""
    @app.exception_handler(errors.ApiError)
    async def on_api_error(request: Request, error: errors.ApiError) -> JSONResponse:
        return error_response(request, error)

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, error: StarletteHTTPException) -> Response:
        if error.status_code == 404 and not_found_page is not None:
            page = not_found_page(request)
            if page is not None:
                return page
        if error.status_code == 405:
            mapped: errors.ApiError = errors.MethodNotAllowed(
                NOT_ALLOWED.format(path=request.url.path, method=request.method),
                headers={"Allow": allowed_methods(request)},
            )
        elif error.status_code == 404:
            mapped = errors.NotFound(NOT_FOUND.format(path=request.url.path))
        else:
            mapped = errors.InvalidRequest(str(error.detail))
        return error_response(request, mapped)

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, error: Exception) -> JSONResponse:
        return unexpected_response(request, error)
