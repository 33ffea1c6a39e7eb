"""The App's pages: one HTML shell for every page path, its static files, and the files to download
(`/downloads/workshop.ipynb`, the docs' workshop notebook).

The shell routes on the client. It may be mounted under a prefix (a Serve
route_prefix such as /browser), so it carries `<base href>` and the
`acs-root` meta from the ASGI root_path, and every URL in the JS is
relative to them. Each page carries the Content-Security-Policy made from
the shell (api/webapp/policy.py); the prefix lives in attributes, never in
an inline script, so the script's hash stays the same under any prefix.
"""
from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse
from starlette.exceptions import HTTPException

from api.webapp.policy import page_policy

STATIC = Path(__file__).with_name("static")
SHELL = STATIC / "index.html"
# Files to download at a stable path (`/downloads/<name>`): the workshop notebook of the docs' Cookbook.
DOWNLOADS = Path(__file__).with_name("downloads")
DOWNLOAD_TYPES = {".ipynb": "application/x-ipynb+json"}
PAGES = (
    "/", "/sign-in", "/apply", "/set-password", "/forgot-password", "/reset-password",
    "/playground", "/loom", "/api-keys", "/usage", "/usage/request", "/profile", "/jobs",
    "/admin", "/admin/users/{user_id}",
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


@dataclass(frozen=True)
class Shell:
    """The shell's text, read once, and the policy made from that very text: the policy's hashes
    are those of the inline scripts that the pages serve."""

    template: str
    policy: str

    @classmethod
    def read(cls, path: Path = SHELL) -> Shell:
        template = path.read_text(encoding="utf-8")
        return cls(template, page_policy(template))

    def render(self, root_path: str) -> str:
        root = root_path.rstrip("/")
        return (self.template
                .replace("{{base_href}}", escape(root + "/", quote=True))
                .replace("{{acs_root}}", escape(root, quote=True)))

    def response(self, request: Request, status_code: int = 200) -> HTMLResponse:
        """The shell for this request's prefix, with the page's policy and security headers; the
        client picks the page by path (the App's "Page not found" answers 404 with it)."""
        html = self.render(request.scope.get("root_path", ""))
        return HTMLResponse(html, status_code=status_code, headers={
            "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": self.policy,
            "X-Frame-Options": "DENY",  # frame-ancestors 'none', for browsers that predate it
        })


def webapp_router(shell: Shell | None = None) -> APIRouter:
    """The App's pages over `shell` (read from static/ when not given), and its static files;
    built once with the app (api/app.py)."""
    shell = shell or Shell.read()
    router = APIRouter(include_in_schema=False)

    async def page(request: Request) -> HTMLResponse:
        return shell.response(request)

    for path in PAGES:
        router.add_api_route(path, page, methods=["GET", "HEAD"], response_class=HTMLResponse)
    router.add_api_route("/app-static/{path:path}", app_static, methods=["GET", "HEAD"])
    router.add_api_route("/downloads/{name}", download, methods=["GET", "HEAD"])
    return router


def static_file(path: str) -> Path | None:
    """The file under static/ that `path` names, or None (no escapes, known types only)."""
    candidate = (STATIC / path).resolve()
    if not candidate.is_relative_to(STATIC.resolve()) or candidate == SHELL.resolve():
        return None
    if not candidate.is_file() or candidate.suffix not in CONTENT_TYPES:
        return None
    return candidate


async def app_static(path: str) -> FileResponse:
    found = static_file(path)
    if found is None:
        raise HTTPException(status_code=404)
    return FileResponse(found, media_type=CONTENT_TYPES[found.suffix],
                        headers={"Cache-Control": STATIC_CACHE, "X-Content-Type-Options": "nosniff"})


async def download(name: str) -> FileResponse:
    """A file of downloads/ by its name, as an attachment (a browser saves it rather than shows it)."""
    found = DOWNLOADS / name
    if "/" in name or name.startswith(".") or found.suffix not in DOWNLOAD_TYPES or not found.is_file():
        raise HTTPException(status_code=404)
    return FileResponse(found, media_type=DOWNLOAD_TYPES[found.suffix], filename=name,
                        headers={"Cache-Control": STATIC_CACHE, "X-Content-Type-Options": "nosniff"})
