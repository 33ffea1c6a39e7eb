"""An opt-in pytest plugin: after each test, the ledger's invariants (ledger/audit) on the ledger the
test left, so that the ledgers of the existing tests show whether a correct ledger reads clean.

    ACS_TEST_DB_TAG=me python -m pytest -p tests.invariants_probe tests/unit/test_jobs.py

It prints, at the end, each test whose ledger gained violations, with them. It fails no test:
many tests stop mid-way on purpose (a Hold left held by a killed process, a Budget an admin set),
and their ledgers are not the quiet ledger the invariants speak of; reading the list is the point.
The fake stack's databases live for the whole session, so a test is given only the violations
that were not there before it.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ledger.audit import Violation, check_database
from tests.ledger_fixtures import run_in_thread

_seen: dict[str, set[tuple[str, str]]] = {}
_found: list[tuple[str, list[Violation]]] = []


def _url_of(request: pytest.FixtureRequest) -> str | None:
    """The URL of the ledger the test wrote: the fake or real stack's, the admin routes' (tests/unit/
    test_admin_routes.py), or db_url's."""
    for name in ("fake_stack", "real_stack"):
        if name in request.fixturenames:
            stack = request.getfixturevalue(name)
            return stack.services.sessions.kw["bind"].url.render_as_string(hide_password=False)
    if "admin" in request.fixturenames:
        return request.getfixturevalue("admin").url
    if "db_url" in request.fixturenames:
        return request.getfixturevalue("db_url")
    return None


@pytest.fixture(autouse=True)
def _audit_after(request: pytest.FixtureRequest) -> Iterator[None]:
    url = _url_of(request)  # before the test: a fixture torn down after it is no longer there
    yield
    if url is None:
        return
    found = run_in_thread(check_database, url)
    seen = _seen.setdefault(url, set())
    new = [violation for violation in found if (violation.invariant.value, violation.subject) not in seen]
    seen.update((violation.invariant.value, violation.subject) for violation in found)
    if new:
        _found.append((request.node.nodeid, new))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.section("ledger invariants after each test")
    for nodeid, violations in _found:
        terminalreporter.write_line(nodeid)
        for violation in violations:
            terminalreporter.write_line(f"  {violation.invariant.value} {violation.subject}: {violation.detail}")
    terminalreporter.write_line(f"tests whose ledger gained violations: {len(_found)}")
