"""The App's pages: one HTML shell for every page path, and its static files.

The shell routes on the client. It may be mounted under a prefix (a Serve
route_prefix such as /browser), so it carries `<base href>` and the
`acs-root` meta from the ASGI root_path, and every URL in the JS is
relative to them. Each page carries the Content-Security-Policy made from
the shell (api/webapp/policy.py); the prefix lives in attributes, never in
an inline script, so the script's hash stays the same under any prefix.
"""
from __future__ import annotations

from functools import lru_cache
from html import escape
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse
from starlette.exceptions import HTTPException

from api.webapp.policy import page_policy

STATIC = Path(__file__).with_name("static")
SHELL = STATIC / "index.html"
PAGES = (
    "/", "/sign-in", "/apply", "/set-password", "/forgot-password", "/reset-password",
    "/api-keys", "/usage", "/usage/request", "/profile", "/jobs",
)
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".map": "application/json",
}
# Files keep their names across releases, so the browser asks again (ETag) each load.
STATIC_CACHE = "no-cache"

router = APIRouter(include_in_schema=False)


@lru_cache(maxsize=1)
def _template() -> str:
    return SHELL.read_text(encoding="utf-8")


# Read once at startup: the policy's hashes come from the very text the pages serve.
PAGE_POLICY = page_policy(_template())


def render_shell(root_path: str) -> str:
    root = root_path.rstrip("/")
    return (_template()
            .replace("{{base_href}}", escape(root + "/", quote=True))
            .replace("{{acs_root}}", escape(root, quote=True)))


async def page(request: Request) -> HTMLResponse:
    html = render_shell(request.scope.get("root_path", ""))
    return HTMLResponse(html, headers={
        "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": PAGE_POLICY,
        "X-Frame-Options": "DENY",  # frame-ancestors 'none', for browsers that predate it
    })


for _path in PAGES:
    router.add_api_route(_path, page, methods=["GET", "HEAD"], response_class=HTMLResponse)


def static_file(path: str) -> Path | None:
    """The file under static/ that `path` names, or None (no escapes, known types only)."""
    candidate = (STATIC / path).resolve()
    if not candidate.is_relative_to(STATIC.resolve()) or candidate == SHELL.resolve():
        return None
    if not candidate.is_file() or candidate.suffix not in CONTENT_TYPES:
        return None
    return candidate


@router.api_route("/app-static/{path:path}", methods=["GET", "HEAD"])
async def app_static(path: str) -> FileResponse:
    found = static_file(path)
    if found is None:
        raise HTTPException(status_code=404)
    return FileResponse(found, media_type=CONTENT_TYPES[found.suffix],
                        headers={"Cache-Control": STATIC_CACHE, "X-Content-Type-Options": "nosniff"})
