"""The App's own "Page not found" (issue 35): a browser that asks for an address of the App that no
page has gets the App's shell with status 404 and the pages' policy and security headers, under
any route prefix; the API's routes (/v1, /account, /app-static, ...), a non-browser client and any
method but GET and HEAD keep the spec's JSON 404 exactly."""
from __future__ import annotations

from typing import Any, Callable

import httpx
import pytest

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"  # Chromium's page request


@pytest.fixture
def client(fake_stack: Any) -> Callable[..., httpx.AsyncClient]:
    def make(root_path: str = "") -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=fake_stack.app, root_path=root_path)
        return httpx.AsyncClient(transport=transport, base_url="http://app.test")
    return make


@pytest.mark.parametrize("root_path", ["", "/browser"])
@pytest.mark.parametrize("path", ["/no-such-page", "/playgrounds", "/usage/no-such-part", "/api-keys/x/y", "/Usage"])
async def test_a_browser_gets_the_apps_page_with_404(root_path: str, path: str,
                                                      client: Callable[..., httpx.AsyncClient]) -> None:
    async with client(root_path) as http:
        answer = await http.get(root_path + path, headers={"Accept": BROWSER})
        page = await http.get(f"{root_path}/usage", headers={"Accept": BROWSER})
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.text == page.text  # the one shell: the client draws "Page not found"
    assert f'<base href="{root_path}/">' in answer.text
    for header in ("content-security-policy", "x-frame-options", "cache-control", "referrer-policy",
                   "x-content-type-options"):
        assert answer.headers[header] == page.headers[header], header
    assert "default-src 'self'" in answer.headers["content-security-policy"]


async def test_head_gets_the_page_too(client: Callable[..., httpx.AsyncClient]) -> None:
    async with client() as http:
        answer = await http.head("/no-such-page", headers={"Accept": BROWSER})
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("text/html")


def spec_404(path: str, request_id: str) -> dict[str, Any]:
    return {"error": {"message": f"No route has the path {path}.", "type": "invalid_request_error",
                      "param": None, "code": None}, "request_id": request_id}


@pytest.mark.parametrize(("path", "accept", "method"), [
    ("/v1/no-such-route", BROWSER, "GET"),
    ("/v1", BROWSER, "GET"),
    ("/account/no-such-route", BROWSER, "GET"),
    ("/app-static/js/nope.js", BROWSER, "GET"),
    ("/health/nope", BROWSER, "GET"),
    ("/metrics/nope", BROWSER, "GET"),
    ("/openapi.json/x", BROWSER, "GET"),
    ("/docs/no-such-page", BROWSER, "GET"),
    ("/no-such-page", "*/*", "GET"),  # curl, a script
    ("/no-such-page", "application/json", "GET"),
    ("/no-such-page", BROWSER, "DELETE"),
])
async def test_the_api_keeps_its_json_404(path: str, accept: str, method: str,
                                          client: Callable[..., httpx.AsyncClient]) -> None:
    async with client() as http:
        answer = await http.request(method, path, headers={"Accept": accept})
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == spec_404(path, answer.headers["x-request-id"])
    assert answer.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"


async def test_a_post_to_an_unknown_path_keeps_the_json_404_under_a_prefix(client: Callable[..., httpx.AsyncClient]) -> None:
    async with client("/browser") as http:
        answer = await http.post("/browser/no-such-page", headers={"Accept": BROWSER}, json={})
        v1 = await http.get("/browser/v1/no-such-route", headers={"Accept": BROWSER})
    assert answer.status_code == 404 and answer.headers["content-type"] == "application/json"
    assert v1.status_code == 404 and v1.json()["error"]["message"] == "No route has the path /browser/v1/no-such-route."
