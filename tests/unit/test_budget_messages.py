"""The header and the 429 messages of "Near the end of your tokens", as pure functions."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from domain.budget import budget_exceeded, clamp_value
from ledger.tokens.holds import Shortfall

URL = "https://v2.infra.acsresearch.org/usage/request"
DEC_1 = datetime(2026, 12, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("requested,applied,budget,deadline,source,expected", [
    (200, 21, True, False, "client", "requested=200,applied=21,reason=budget,source=client"),
    (2044, 21, True, False, "default", "requested=2044,applied=21,reason=budget,source=default"),
    (32000, 15600, False, True, "default", "requested=32000,applied=15600,reason=deadline"),
    (15600, 900, True, True, "default", "requested=15600,applied=900,reason=deadline+budget,source=default"),
    (200, 200, False, False, "client", None),
])
def test_the_clamp_header(requested, applied, budget, deadline, source, expected) -> None:
    assert clamp_value(requested, applied, budget=budget, deadline=deadline, source=source) == expected


def test_the_keys_budget_message() -> None:
    error = budget_exceeded(Shortfall(211, True, 5_000_000, DEC_1), URL)
    assert error.message == "This request can use up to 211 tokens, more than this API key's token budget has left."
    assert (error.status, error.code, error.headers()) == (429, "budget_exceeded", {"x-should-retry": "false"})


def test_the_users_budget_message_without_an_allowance() -> None:
    error = budget_exceeded(Shortfall(13, False, 0, DEC_1), URL)
    assert error.message == (
        "This request can use up to 13 tokens, more than your token budget has left. "
        "Ask for more tokens at https://v2.infra.acsresearch.org/usage/request.")


def test_the_allowance_message_gives_the_refill_day() -> None:
    error = budget_exceeded(Shortfall(13, False, 5_000_000, DEC_1), URL)
    assert error.message == (
        "This request can use up to 13 tokens, more than your monthly allowance has left this month and "
        "more than your token budget has left. Your monthly allowance refills on 2026-12-01 (UTC). "
        "Ask for more tokens at https://v2.infra.acsresearch.org/usage/request.")
