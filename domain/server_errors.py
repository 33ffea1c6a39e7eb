"""Counting the API's own failures for Analytics' Platform tab: each answer that is a 5xx error object is
one more server error of its UTC day, and Inference's timeout (504 upstream_deadline) one more timeout.

It runs after the answer went out (api/errors_http.py), and a count that cannot be written is given up:
the numbers are for reading trends, and a database that fails the request fails its count too."""
from __future__ import annotations

import logging

from domain import errors
from domain.services import Services
from ledger.tokens import server_errors
from ledger.tokens.server_errors import ErrorKind

log = logging.getLogger("acs.api")
TIMEOUT_CODES = {"upstream_deadline"}
# A database with no free connection cannot take the count either: writing it would only queue more work
# on the pool that refused the request. /metrics counts those answers.
NOT_COUNTED = {"db_pool_exhausted"}


def kind_of(error: errors.ApiError) -> ErrorKind | None:
    """What the error counts as, or None for an answer that is not the API's failure (4xx) or that the
    database cannot count."""
    if error.code in NOT_COUNTED:
        return None
    if error.code in TIMEOUT_CODES:
        return ErrorKind.timeout
    return ErrorKind.server_error if error.status >= 500 else None


async def record(services: Services, kind: ErrorKind) -> None:
    try:
        async with services.ledger.write_sessions() as session:
            await server_errors.count_one(session, services.clock().date(), kind)
    except Exception as failure:  # noqa: BLE001 - a lost count must never fail or slow an answer
        log.warning("a %s was not counted for Analytics: %s", kind.value, failure)
