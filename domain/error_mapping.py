"""The one place where errors of the layers below become the API's errors.

The layers below the domain know no HTTP and no ApiError. The ledger refuses with a `LedgerError`
(ledger/errors.py: an admin's operation, a request's key, the App's access, keys and token requests,
a Loom's change, a Playground Run's id); the engine and its checks with `EngineRefused`, and fail with
`EngineOutOfMemory` or `EngineDead`; the tensor codec with `TensorError`; a harvest's link with `LinkRefused` and its
storage with `StorageRefused`; SQLAlchemy with its pool's timeout. `ANSWERS` says which error of the
spec answers each class. `as_api_error` looks an error up by its own class, then by each class that
it inherits from, so a new subclass answers as its family does; tests/unit/test_error_mapping.py
asks every class for an answer of its own, and checks each through a route.

The one registered handler (api/errors_http.py) calls `as_api_error` for every exception that is not
an ApiError already: a use case or a route lets a refusal rise and never maps it itself. A refusal
carries what its answer needs: a `LedgerError` names the request's field in its `param`, set where it
is raised, so the answer is the same whoever called.

Only the reader changes an answer. The App's account routes speak to a key's owner, in the spec's
words ("Manage your keys": 409 key_name_taken, too_many_keys, key_revoked); an admin's routes answer
the same refusals of the ledger with its own words, as 400s. `OWNER_ANSWERS` holds those three.

Code that owes its caller an ApiError where no handler runs (the gateway's outputs, a Completion's
planning, which background work repeats when it runs, a Loom stream's late failure) asks here too.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from sqlalchemy.exc import TimeoutError as PoolTimeout

from domain import errors
from deployments.checks import STEERING_PARAM
from deployments.engine import EngineDead, EngineOutOfMemory, EngineRefused
from deployments.tensor_codec import TensorError
from harvest.links import LinkRefused
from harvest.storage import StorageRefused
from ledger import errors as ledger

Answer = Callable[[Any], errors.ApiError]

CONTEXT_LENGTH = re.compile(r"maximum context length|context length", re.I)
# A warm window's refusal names the ledger's value; the admin route's body calls it so.
WINDOW_FIELDS = {"start_minute": "from", "end_minute": "to"}


def engine_refusal(refusal: EngineRefused) -> errors.ApiError:
    """A refusal of the request's values: the API's check, Inference's 400, or Inference's
    failure that blames the request (vllm_invalid_request)."""
    too_long = refusal.code == "context_length_exceeded" or CONTEXT_LENGTH.search(refusal.message)
    if refusal.code == "vllm_invalid_request":
        upstream = errors.VllmContextLength if too_long else errors.VllmInvalidRequest
        return upstream(refusal.message, refusal.param)
    if too_long:
        return errors.ContextLengthExceeded(refusal.message, "prompt")
    return errors.InvalidRequest(refusal.message, refusal.param)


def link_refusal(refusal: LinkRefused) -> errors.ApiError:
    """A harvest file's link: 403, expired (read the harvest again) or not valid."""
    if refusal.reason == "expired":
        return errors.HarvestLinkExpired(refusal.message)
    return errors.HarvestLinkInvalid(refusal.message)


def refused_value(refusal: ledger.LedgerError) -> errors.ApiError:
    """A value or a change that the ledger refused: 400 with its message, naming its field."""
    return errors.InvalidRequest(str(refusal), refusal.param)


def not_there(refusal: ledger.LedgerError) -> errors.ApiError:
    return errors.NotFound(str(refusal))


def window_refusal(refusal: ledger.WarmWindowRefused) -> errors.ApiError:
    return errors.InvalidRequest(refusal.message, WINDOW_FIELDS.get(refusal.field, refusal.field))


def answered_by(kind: type[errors.ApiError]) -> Answer:
    """The answer of class `kind`, with the refusal's message (the spec's own, where it has one)."""
    return lambda refusal: kind(str(refusal))


ANSWERS: dict[type[BaseException], Answer] = {
    # The engine and its checks (deployments/): a request's values refused, or Inference failed.
    EngineRefused: engine_refusal,
    EngineOutOfMemory: lambda error: errors.VllmOom(f"Inference ran out of GPU memory: {error}"),
    EngineDead: lambda error: errors.VllmEngineDead(f"Inference's engine stopped: {error}"),
    # The API decodes one kind of tensor: the encoded Steering vectors of a request.
    TensorError: lambda error: errors.InvalidRequest(f"An encoded Steering vector cannot be read: {error}.",
                                                     STEERING_PARAM),
    # A harvest's files (harvest/).
    LinkRefused: link_refusal,
    StorageRefused: not_there,
    # SQLAlchemy's "QueuePool limit ... reached": no connection, so nothing ran.
    PoolTimeout: lambda _: errors.DbPoolExhausted(errors.DB_POOL_EXHAUSTED_MESSAGE),
    # The ledger: an operation refused (an admin's, mostly), or what it names is not there.
    ledger.LedgerError: refused_value,
    ledger.NameRefused: refused_value,
    ledger.NameTaken: refused_value,
    ledger.TooManyKeys: refused_value,
    ledger.StatusChangeRefused: refused_value,
    ledger.NotFound: not_there,
    ledger.UnknownModel: lambda refusal: errors.ModelNotFound(str(refusal), "model"),
    ledger.WarmWindowRefused: window_refusal,
    # The key check: the spec's 401s, with the spec's messages.
    ledger.KeyRefused: answered_by(errors.InvalidApiKey),
    ledger.NoKeyGiven: answered_by(errors.MissingAuthorization),
    ledger.UnknownKey: answered_by(errors.InvalidApiKey),
    ledger.RevokedKey: answered_by(errors.KeyRevoked),
    ledger.PausedKey: answered_by(errors.KeyDisabled),
    ledger.SuspendedAccount: answered_by(errors.AccountSuspended),
    # Looms.
    ledger.LoomNotFound: not_there,
    ledger.LoomConflict: answered_by(errors.LoomConflict),
    # The App's access: Apply, Invites, sign-in, password links.
    ledger.AccessRefused: refused_value,
    ledger.ApplicationExists: answered_by(errors.ApplicationExists),
    ledger.LinkExpired: answered_by(errors.AccessLinkExpired),
    ledger.SignInFailed: answered_by(errors.SignInFailed),
    ledger.SignInSuspended: answered_by(errors.SignInSuspended),
    ledger.PasswordRefused: refused_value,
    ledger.EmailRefused: refused_value,
    ledger.FormRefused: refused_value,
    ledger.TooManyTries: lambda refusal: errors.TooManyTries(str(refusal), retry_after=refusal.wait_s),
    # The App's keys and token requests.
    ledger.OwnKeyNotFound: answered_by(errors.KeyNotFound),
    ledger.TokenRequestRefused: refused_value,
    ledger.TokenRequestWaiting: answered_by(errors.TokenRequestWaiting),
    # The App's Playground Runs.
    ledger.RunNotFound: not_there,
}

# What a key's owner reads in the App (the spec), where an admin reads the ledger's words.
OWNER_ANSWERS: dict[type[BaseException], Answer] = {
    ledger.TooManyKeys: answered_by(errors.TooManyKeys),
    ledger.NameTaken: lambda refusal: errors.KeyNameTaken(errors.KEY_NAME_TAKEN_MESSAGE.format(name=refusal.name),
                                                          "name"),
    ledger.StatusChangeRefused: lambda _: errors.KeyRevokedForGood(errors.KEY_REVOKED_FOR_GOOD_MESSAGE),
}


def as_api_error(error: BaseException, *, owner: bool = False) -> errors.ApiError | None:
    """The spec's error that answers `error`; None for an unexpected failure (the API's 500).

    `owner`: the reader is the key's owner in the App (an /account route), not an admin.
    """
    if isinstance(error, errors.ApiError):
        return error
    for kind in type(error).__mro__:
        answer = (OWNER_ANSWERS.get(kind) if owner else None) or ANSWERS.get(kind)
        if answer is not None:
            return answer(error)
    return None


def api_error_of(refusal: Exception) -> errors.ApiError:
    """The answer to a refusal that has one, for code that owes its caller an ApiError where no
    handler runs (background work records it as the request's answer)."""
    answer = as_api_error(refusal)
    if answer is None:
        raise TypeError(f"{type(refusal).__name__} has no answer in domain/error_mapping.py") from refusal
    return answer


def key_refusal_error(refusal: ledger.KeyRefused) -> errors.ApiError:
    """The 401 that answers a refused key, for the key checks that run outside a route's handler."""
    return api_error_of(refusal)
