"""The one place where errors of the layers below become the API's errors.

The engine's checks raise `EngineRefused`, the ledger's key check raises
`KeyRefused`, the Looms' checks `LoomNotFound` and `LoomConflict`, and SQLAlchemy raises its pool timeout; none knows HTTP.
The admin routes map the refusals of the admin's operations (`ledger_refusals`).
`as_api_error` answers each with the spec's error (None: an unexpected
failure, the API's 500).
"""
from __future__ import annotations

import contextlib
import re
from typing import Iterator

from sqlalchemy.exc import TimeoutError as PoolTimeout

from api import errors
from deployments.engine import EngineRefused
from ledger import errors as ledger_errors

CONTEXT_LENGTH = re.compile(r"maximum context length|context length", re.I)

KEY_REFUSALS: dict[type[ledger_errors.KeyRefused], type[errors.AuthError]] = {
    ledger_errors.NoKeyGiven: errors.MissingAuthorization,
    ledger_errors.UnknownKey: errors.InvalidApiKey,
    ledger_errors.RevokedKey: errors.KeyRevoked,
    ledger_errors.PausedKey: errors.KeyDisabled,
    ledger_errors.SuspendedAccount: errors.AccountSuspended,
}


def refusal_error(refusal: EngineRefused) -> errors.ApiError:
    """A refusal of the request's values: the API's check or Inference's 400."""
    if refusal.code == "context_length_exceeded" or CONTEXT_LENGTH.search(refusal.message):
        return errors.ContextLengthExceeded(refusal.message, "prompt")
    return errors.InvalidRequest(refusal.message, refusal.param)


def key_refusal_error(refusal: ledger_errors.KeyRefused) -> errors.AuthError:
    return KEY_REFUSALS[type(refusal)](refusal.message)


def as_api_error(error: BaseException) -> errors.ApiError | None:
    if isinstance(error, errors.ApiError):
        return error
    if isinstance(error, EngineRefused):
        return refusal_error(error)
    if isinstance(error, ledger_errors.KeyRefused):
        return key_refusal_error(error)
    if isinstance(error, ledger_errors.LoomNotFound):
        return errors.NotFound(error.message)
    if isinstance(error, ledger_errors.LoomConflict):
        return errors.LoomConflict(error.message)
    if isinstance(error, PoolTimeout):
        # SQLAlchemy's "QueuePool limit ... reached": no connection, so nothing ran.
        return errors.DbPoolExhausted(errors.DB_POOL_EXHAUSTED_MESSAGE)
    return None


@contextlib.contextmanager
def as_api_errors() -> Iterator[None]:
    """Around the API's calls of the checks below it: their refusals raise as 400s."""
    try:
        yield
    except EngineRefused as refusal:
        raise refusal_error(refusal) from None


# A warm window's refusal names the ledger's value; the admin route's body calls it so.
WINDOW_FIELDS = {"start_minute": "from", "end_minute": "to"}


def ledger_refusal_error(refusal: ledger_errors.LedgerError, param: str | None = None) -> errors.ApiError:
    """An admin operation that the ledger refused: 404 for what is not there, else 400 with its message."""
    message = str(refusal)
    if isinstance(refusal, ledger_errors.UnknownModel):
        return errors.ModelNotFound(message, "model")
    if isinstance(refusal, ledger_errors.NotFound):
        return errors.NotFound(message)
    if isinstance(refusal, ledger_errors.WarmWindowRefused):
        return errors.InvalidRequest(message, WINDOW_FIELDS.get(refusal.field, refusal.field))
    return errors.InvalidRequest(message, param)


@contextlib.contextmanager
def ledger_refusals(param: str | None = None) -> Iterator[None]:
    """Around an admin route's call of the operations: their refusals raise as the API's errors."""
    try:
        yield
    except ledger_errors.LedgerError as refusal:
        raise ledger_refusal_error(refusal, param) from None
