"""The App's pages and static files (api/webapp), and the pinned front-end packages.

Each page path answers the one HTML shell, with <base href> and the acs-root meta under
the route prefix the app is mounted at, and the security headers (a Content-Security-Policy
whose script hashes are the shell's inline scripts, no referrer, HSTS over https only);
static files carry their content types; an unknown static file gets the API's 404 error
object.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

from api.webapp.policy import page_policy
from api.webapp.router import DOWNLOADS, PAGES, STATIC

WEBAPP = Path(STATIC).parent
EXACT = re.compile(r"^\d+\.\d+\.\d+$")


@pytest.fixture
def client(fake_stack: Any) -> Callable[..., httpx.AsyncClient]:
    """The whole API app (its middleware too), optionally under a route prefix."""
    def make(root_path: str = "", scheme: str = "http") -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=fake_stack.app, root_path=root_path)
        return httpx.AsyncClient(transport=transport, base_url=f"{scheme}://app.test")
    return make


def policy(answer: httpx.Response) -> dict[str, list[str]]:
    """The answer's Content-Security-Policy, directive -> its sources."""
    directives = [part.split() for part in answer.headers["content-security-policy"].split(";") if part.strip()]
    return {words[0]: words[1:] for words in directives}


def inline_scripts(page: str) -> list[str]:
    """The exact text of each <script> of the page that has no src."""
    return re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", page, re.S)


def sha256_source(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


@pytest.mark.parametrize("path", PAGES)
async def test_each_page_answers_the_shell(path: str, client: Callable[..., httpx.AsyncClient]) -> None:
    async with client() as http:
        answer = await http.get(path, headers={"Accept-Encoding": "gzip"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["cache-control"] == "no-store"
    assert "content-encoding" not in answer.headers
    assert '<base href="/">' in answer.text
    assert '<meta name="acs-root" content="">' in answer.text
    assert '<script type="module" src="app-static/js/main.js"></script>' in answer.text


async def test_the_shell_under_a_route_prefix(client: Callable[..., httpx.AsyncClient]) -> None:
    async with client("/browser") as http:
        answer = await http.get("/browser/usage/request", params={"x": "1"})
        script = await http.get("/browser/app-static/js/main.js")
    assert answer.status_code == 200
    assert '<base href="/browser/">' in answer.text
    assert '<meta name="acs-root" content="/browser">' in answer.text
    assert script.status_code == 200


@pytest.mark.parametrize("path", PAGES)
async def test_each_page_sends_the_security_headers(path: str, client: Callable[..., httpx.AsyncClient]) -> None:
    async with client() as http:
        answer = await http.get(path)
    rules = policy(answer)
    assert rules["default-src"] == ["'self'"]
    assert rules["frame-ancestors"] == ["'none'"]
    assert rules["object-src"] == ["'none'"]
    assert rules["base-uri"] == ["'self'"]
    assert rules["script-src"][0] == "'self'" and len(rules["script-src"]) > 1
    assert rules["style-src"] == ["'self'"]
    assert "unsafe" not in answer.headers["content-security-policy"]
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"
    assert "strict-transport-security" not in answer.headers  # plain http: a browser ignores it anyway


@pytest.mark.parametrize("root_path", ["", "/browser"])
async def test_the_policy_hashes_are_the_pages_inline_scripts(root_path: str, client: Callable[..., httpx.AsyncClient]) -> None:
    """Every inline script runs (its hash is in script-src), and nothing else inline does."""
    async with client(root_path) as http:
        answer = await http.get(f"{root_path}/usage")
    scripts = inline_scripts(answer.text)
    assert scripts and all(script.strip() for script in scripts)
    hashes = [source for source in policy(answer)["script-src"] if source.startswith("'sha")]
    assert sorted(hashes) == sorted(sha256_source(script) for script in scripts)
    # Inline styles and handlers would need 'unsafe-inline' (or 'unsafe-hashes'): the shell has none.
    assert not re.search(r"<style|\sstyle=|\son[a-z]+=", answer.text, re.I)
    # default-src 'self': whatever the shell loads (the icon included) is the App's own file.
    for address in re.findall(r'\s(?:src|href)="([^"]*)"', answer.text):
        assert not re.match(r"^([a-z][a-z0-9+.-]*:|//)", address, re.I), address


@pytest.mark.parametrize("path", ["/usage", "/app-static/app.css", "/no-such-page", "/v1/models"])
async def test_hsts_only_over_https(path: str, client: Callable[..., httpx.AsyncClient]) -> None:
    async with client(scheme="https") as secure, client() as plain:
        over_https = await secure.get(path)
        over_http = await plain.get(path)
    assert over_https.headers["strict-transport-security"] == "max-age=31536000; includeSubDomains"
    assert "strict-transport-security" not in over_http.headers


@pytest.mark.settings(trusted_proxies="10.0.0.0/8, 127.0.0.1")
async def test_hsts_behind_a_proxy_only_when_it_is_trusted(fake_stack: Any) -> None:
    """X-Forwarded-Proto counts from a peer that ACS_TRUSTED_PROXIES names, and its first entry (the
    scheme that the proxy nearest the client saw)."""
    async def hsts(peer: str, forwarded_proto: str) -> str | None:
        transport = httpx.ASGITransport(app=fake_stack.app, client=(peer, 4000))
        async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as http:
            answer = await http.get("/usage", headers={"X-Forwarded-Proto": forwarded_proto})
        return answer.headers.get("strict-transport-security")

    assert await hsts("127.0.0.1", "https") == "max-age=31536000; includeSubDomains"
    assert await hsts("10.1.2.3", "https") == "max-age=31536000; includeSubDomains"
    assert await hsts("::ffff:10.1.2.3", "https") == "max-age=31536000; includeSubDomains"
    assert await hsts("192.0.2.9", "https") is None  # anyone else may write the header
    assert await hsts("127.0.0.1", "http") is None
    assert await hsts("127.0.0.1", "http, https") is None


@pytest.mark.parametrize("path", ["/no-such-page", "/v1/models", "/account/me", "/app-static/js/main.js"])
async def test_other_answers_send_no_referrer_and_nosniff(path: str, client: Callable[..., httpx.AsyncClient]) -> None:
    """Tokens travel in query strings (password links, harvest links): no answer lets the browser pass them on."""
    async with client() as http:
        answer = await http.get(path)
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert answer.headers["x-content-type-options"] == "nosniff"
    if "json" in answer.headers["content-type"]:  # nothing a JSON answer holds may run as a page
        assert policy(answer) == {"default-src": ["'none'"], "frame-ancestors": ["'none'"]}


async def test_a_cors_preflight_sends_them_too(client: Callable[..., httpx.AsyncClient]) -> None:
    """CORS answers a preflight itself, before any route: the headers wrap it as well."""
    async with client(scheme="https") as http:
        answer = await http.options("/v1/completions", headers={
            "Origin": "https://elsewhere.test", "Access-Control-Request-Method": "POST"})
    assert answer.status_code == 200
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert answer.headers["strict-transport-security"] == "max-age=31536000; includeSubDomains"


def test_a_placeholder_in_an_inline_script_stops_the_start() -> None:
    """Its text, and so its hash, would change with each request: the policy would block it."""
    with pytest.raises(ValueError, match="placeholder"):
        page_policy('<script type="importmap">{"imports": {"x": "{{base_href}}x.js"}}</script>')


@pytest.mark.parametrize(("path", "content_type"), [
    ("/app-static/app.css", "text/css; charset=utf-8"),
    ("/app-static/js/main.js", "text/javascript; charset=utf-8"),
    ("/app-static/js/pages/api_keys.js", "text/javascript; charset=utf-8"),
    ("/app-static/favicon.svg", "image/svg+xml"),
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


async def test_the_workshop_notebook_downloads_at_its_stable_path(client: Callable[..., httpx.AsyncClient]) -> None:
    async with client("/browser") as http:
        answer = await http.get("/browser/downloads/workshop.ipynb")
        head = await http.head("/browser/downloads/workshop.ipynb")
    assert answer.status_code == head.status_code == 200
    assert answer.headers["content-type"] == "application/x-ipynb+json"
    assert answer.headers["content-disposition"] == 'attachment; filename="workshop.ipynb"'
    assert answer.content == (DOWNLOADS / "workshop.ipynb").read_bytes()
    notebook = answer.json()
    assert notebook["nbformat"] == 4 and notebook["metadata"]["kernelspec"]["name"] == "python3"
    # The file keeps no outputs: each text a reader sees is their own sample.
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert code and all(cell["outputs"] == [] and cell["execution_count"] is None for cell in code)


@pytest.mark.parametrize("path", ["/downloads/nope.ipynb", "/downloads/..%2frouter.py", "/downloads/router.py",
                                  "/downloads/"])
async def test_other_downloads_get_the_api_404(path: str, client: Callable[..., httpx.AsyncClient]) -> None:
    async with client() as http:
        answer = await http.get(path)
    assert answer.status_code == 404
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
    # The Playground's Activations chart imports the zstd decoder by its path when it opens.
    assert '"$WEBAPP/node_modules/fzstd/esm/index.mjs" "$VENDOR/fzstd.js"' in setup
    assert '"../../vendor/fzstd.js"' in (STATIC / "js" / "playground" / "activations.js").read_text()
