"""The App's /account routes called from inside a page, as the App's own api() calls them: with the
page's session cookie and its CSRF token."""
from __future__ import annotations

from typing import Any


def call(page: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One call of an /account route (a path relative to the App): (status, JSON answer or None)."""
    answer = page.evaluate("""async ([method, path, body]) => {
        const token = decodeURIComponent((document.cookie.match(/acs_csrf=([^;]+)/) || [, ""])[1]);
        const init = {method, headers: {"X-CSRF-Token": token, "Content-Type": "application/json"}};
        if (body !== null) init.body = JSON.stringify(body);
        const answer = await fetch(path, init);
        const text = await answer.text();
        return {status: answer.status, body: text ? JSON.parse(text) : null};
    }""", [method, path, body])
    return answer["status"], answer["body"]


def ok(page: Any, method: str, path: str, body: Any = None, status: int = 200) -> Any:
    """The answer of a call that must succeed with `status`."""
    got, answer = call(page, method, path, body)
    assert got == status, (method, path, got, answer)
    return answer
