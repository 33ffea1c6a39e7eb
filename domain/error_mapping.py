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

from domain import errors
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
    """A refusal of the request's values: the API's check, Inference's 400, or Inference's
    failure that blames the request (vllm_invalid_request)."""
    too_long = refusal.code == "context_length_exceeded" or CONTEXT_LENGTH.search(refusal.message)
    if refusal.code == "vllm_invalid_request":
        upstream = errors.VllmContextLength if too_long else errors.VllmInvalidRequest
        return upstream(refusal.message, refusal.param)
    if too_long:
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


# -- account (A): refusals of the App's access routes ----------------------------------------------------
ACCESS_REFUSALS: dict[type[ledger_errors.AccessRefused], type[errors.ApiError]] = {
    ledger_errors.ApplicationExists: errors.ApplicationExists,
    ledger_errors.LinkExpired: errors.AccessLinkExpired,
    ledger_errors.SignInFailed: errors.SignInFailed,
    ledger_errors.SignInSuspended: errors.SignInSuspended,
}


def access_refusal_error(refusal: ledger_errors.AccessRefused) -> errors.ApiError:
    if isinstance(refusal, ledger_errors.TooManyTries):
        return errors.TooManyTries(refusal.message, retry_after=refusal.wait_s)
    if isinstance(refusal, ledger_errors.PasswordRefused):
        return errors.InvalidRequest(refusal.message, "password")
    if isinstance(refusal, ledger_errors.EmailRefused):
        return errors.InvalidRequest(refusal.message, "email")
    if isinstance(refusal, ledger_errors.FormRefused):
        return errors.InvalidRequest(refusal.message, refusal.field)
    return ACCESS_REFUSALS[type(refusal)](refusal.message)


@contextlib.contextmanager
def access_refusals() -> Iterator[None]:
    """Around an account route's call of the ledger: its access refusals raise as the API's errors."""
    try:
        yield
    except ledger_errors.AccessRefused as refusal:
        raise access_refusal_error(refusal) from None


# -- account (B): refusals of the App's keys and token requests ---------------------------------------------
def account_refusal_error(refusal: ledger_errors.LedgerError, param: str | None = None) -> errors.ApiError:
    """A refusal of the signed-in User's own keys and requests, in the App's words."""
    if isinstance(refusal, ledger_errors.OwnKeyNotFound):
        return errors.KeyNotFound(str(refusal))
    if isinstance(refusal, ledger_errors.TooManyKeys):
        return errors.TooManyKeys(str(refusal))
    if isinstance(refusal, ledger_errors.NameTaken):
        return errors.KeyNameTaken(errors.KEY_NAME_TAKEN_MESSAGE.format(name=refusal.name), "name")
    if isinstance(refusal, ledger_errors.StatusChangeRefused):
        return errors.KeyRevokedForGood(errors.KEY_REVOKED_FOR_GOOD_MESSAGE)
    if isinstance(refusal, ledger_errors.TokenRequestWaiting):
        return errors.TokenRequestWaiting(refusal.message)
    if isinstance(refusal, ledger_errors.TokenRequestRefused):
        return errors.InvalidRequest(refusal.message, refusal.field)
    return ledger_refusal_error(refusal, param)



@contextlib.contextmanager
def account_refusals(param: str | None = None) -> Iterator[None]:
    """Around a keys, usage or token-request route's call of the ledger."""
    try:
        yield
    except ledger_errors.LedgerError as refusal:
        raise account_refusal_error(refusal, param) from None
