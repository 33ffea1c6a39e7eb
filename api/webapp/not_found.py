"""The App's own "Page not found": a browser that opens an address of the App that no page has
gets the App's shell with status 404, and the shell's client draws the page (in the signed-in
frame, or the public one), with the way back. Everything else keeps the API's JSON 404.

An address is the App's when the browser asks for a page (GET or HEAD that accepts text/html)
and its first segment, under the App's prefix, is none of the API's: the API's segments are read
from the app's own routes (/v1, /account, /app-static, /health, /metrics, /openapi.json...), so
a route added later keeps its JSON 404 without a change here, plus the docs site's, which the
host serves beside the App.
"""
from __future__ import annotations

from fastapi import Request
from fastapi.responses import HTMLResponse

from api.webapp.router import PAGES, Shell

# Served beside the App on the same host, never by it: a miss there is not the App's page.
ELSEWHERE = frozenset({"docs"})
PAGE_METHODS = frozenset({"GET", "HEAD"})


def first_segment(path: str) -> str:
    """"v1" for /v1/models, "" for /."""
    return path.lstrip("/").split("/", 1)[0]


def route_path(request: Request) -> str:
    """The path under the App's prefix (the ASGI root_path), as the router matches it."""
    path, root = request.scope.get("path", ""), request.scope.get("root_path", "")
    if root and (path == root or path.startswith(root.rstrip("/") + "/")):
        return path[len(root.rstrip("/")):]
    return path


def api_segments(request: Request) -> frozenset[str]:
    """The first segments that belong to the API (and the docs), never to a page of the App."""
    pages = {first_segment(page) for page in PAGES}
    routes = {first_segment(path) for route in request.app.routes if isinstance(path := getattr(route, "path", None), str)}
    return frozenset(routes - pages) | ELSEWHERE


def asks_for_an_app_page(request: Request) -> bool:
    """Whether this unmatched request is a browser asking for a page of the App."""
    if request.method not in PAGE_METHODS:
        return False
    if "text/html" not in request.headers.get("accept", "").lower():
        return False  # a script, curl, fetch(): the API's JSON 404
    return first_segment(route_path(request)) not in api_segments(request)


class AppNotFound:
    """The 404 answer of an App page that does not exist: the shell (its policy and security
    headers with it), or None where the API's JSON 404 answers."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    def __call__(self, request: Request) -> HTMLResponse | None:
        if not asks_for_an_app_page(request):
            return None
        return self.shell.response(request, status_code=404)
