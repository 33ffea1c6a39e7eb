"""The App's pages and static files (api/webapp), and the pinned front-end packages.

Each page path answers the one HTML shell, with <base href> and ACS_ROOT under the
route prefix the app is mounted at; static files carry their content types; an
unknown static file gets the API's 404 error object.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

from api.webapp.router import PAGES, STATIC

WEBAPP = Path(STATIC).parent
EXACT = re.compile(r"^\d+\.\d+\.\d+$")


@pytest.fixture
def client(fake_stack: Any) -> Callable[..., httpx.AsyncClient]:
    """The whole API app (its middleware too), optionally under a route prefix."""
    def make(root_path: str = "") -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=fake_stack.app, root_path=root_path)
        return httpx.AsyncClient(transport=transport, base_url="http://app.test")
    return make


@pytest.mark.parametrize("path", PAGES)
async def test_each_page_answers_the_shell(path: str, client: Callable[..., httpx.AsyncClient]) -> None:
    async with client() as http:
        answer = await http.get(path, headers={"Accept-Encoding": "gzip"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["cache-control"] == "no-store"
    assert "content-encoding" not in answer.headers
    assert '<base href="/">' in answer.text
    assert 'window.ACS_ROOT = "";' in answer.text
    assert '<script type="module" src="app-static/js/main.js"></script>' in answer.text


async def test_the_shell_under_a_route_prefix(client: Callable[..., httpx.AsyncClient]) -> None:
    async with client("/browser") as http:
        answer = await http.get("/browser/usage/request", params={"x": "1"})
        script = await http.get("/browser/app-static/js/main.js")
    assert answer.status_code == 200
    assert '<base href="/browser/">' in answer.text
    assert 'window.ACS_ROOT = "/browser";' in answer.text
    assert script.status_code == 200


@pytest.mark.parametrize(("path", "content_type"), [
    ("/app-static/app.css", "text/css; charset=utf-8"),
    ("/app-static/js/main.js", "text/javascript; charset=utf-8"),
    ("/app-static/js/pages/api_keys.js", "text/javascript; charset=utf-8"),
])
async def test_static_files_carry_their_content_type(path: str, content_type: str, client: Callable[..., httpx.AsyncClient]) -> None:
    async with client() as http:
        answer = await http.get(path)
        head = await http.head(path)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == content_type
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.content == (STATIC / path.removeprefix("/app-static/")).read_bytes()
    assert head.status_code == 200


@pytest.mark.parametrize("path", [
    "/app-static/js/nope.js", "/app-static/index.html", "/app-static/../router.py",
    "/app-static/%2e%2e/router.py", "/app-static/js",
])
async def test_unknown_static_files_get_the_api_404(path: str, client: Callable[..., httpx.AsyncClient]) -> None:
    async with client() as http:
        answer = await http.get(path)
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"]["type"] == "invalid_request_error"


async def test_a_path_that_is_no_page_keeps_the_api_404(client: Callable[..., httpx.AsyncClient]) -> None:
    async with client() as http:
        answer = await http.get("/no-such-page")
    assert answer.status_code == 404
    assert answer.json()["error"]["message"] == "No route has the path /no-such-page."


def test_every_import_of_the_pages_is_a_file_or_the_import_map() -> None:
    """No bundler: each relative import names a file that exists; bare ones are in the import map."""
    shell = (STATIC / "index.html").read_text()
    mapped = set(json.loads(shell.split('<script type="importmap">')[1].split("</script>")[0])["imports"])
    for module in (STATIC / "js").rglob("*.js"):
        for target in re.findall(r'^import .*? from "([^"]+)";$', module.read_text(), re.M):
            if target.startswith("."):
                assert (module.parent / target).resolve().is_file(), f"{module.name} imports {target}"
            else:
                assert target in mapped, f"{module.name} imports {target}"


def test_the_packages_are_pinned_by_the_lockfile() -> None:
    package = json.loads((WEBAPP / "package.json").read_text())
    lock = json.loads((WEBAPP / "package-lock.json").read_text())
    wanted = {**package["dependencies"], **package.get("devDependencies", {})}
    assert {"preact", "htm", "axe-core"} <= set(wanted)
    assert all(EXACT.match(version) for version in wanted.values()), wanted
    assert lock["lockfileVersion"] >= 2
    root = lock["packages"][""]
    assert root.get("dependencies", {}) == package["dependencies"]
    assert root.get("devDependencies", {}) == package.get("devDependencies", {})
    for name, version in wanted.items():
        entry = lock["packages"][f"node_modules/{name}"]
        assert entry["version"] == version
        assert entry["integrity"].startswith("sha512-")


def test_setup_copies_the_vendor_modules_the_import_map_names() -> None:
    setup = (WEBAPP.parents[1] / "cluster" / "setup.sh").read_text()
    assert "npm ci --no-audit --no-fund" in setup
    for name in ("preact.module.js", "hooks.module.js", "htm.module.js", "axe.min.js"):
        assert name in setup
        if name != "axe.min.js":
            assert f"app-static/vendor/{name}" in (STATIC / "index.html").read_text()
