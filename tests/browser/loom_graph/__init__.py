"""The Loom's Graph alone on a static page (index.html, page.js), served from the repository on
loopback under the App's own Content-Security-Policy (api/webapp/policy.py, made from this page's
inline import map), for tests/browser/test_browser_loom_graph.py and bench/loom_graph.py.

    with serve_page() as url:  # url + "?n=2000&seed=1"
"""
from __future__ import annotations

import contextlib
import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

from api.webapp.policy import page_policy

REPO = Path(__file__).resolve().parents[3]
PAGE = "/tests/browser/loom_graph/index.html"
# Only what the page loads: the App's static files and this folder.
SERVED = ("/api/webapp/static/", "/tests/browser/loom_graph/")


class _Handler(SimpleHTTPRequestHandler):
    extensions_map = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}
    policy = page_policy((REPO / PAGE.lstrip("/")).read_text())

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if not self.path.split("?", 1)[0].startswith(SERVED) or ".." in self.path:
            self.send_error(404)
            return
        super().do_GET()

    def end_headers(self) -> None:
        self.send_header("Content-Security-Policy", self.policy)
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


@contextlib.contextmanager
def serve_page() -> Iterator[str]:
    """The page's address on a free loopback port, while the block runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(REPO)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{PAGE}"
    finally:
        server.shutdown()
        server.server_close()
