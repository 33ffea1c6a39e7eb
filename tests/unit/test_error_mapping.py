"""The one error mapping (domain/error_mapping.py): every neutral error of the layers below the
domain answers with the spec's error object, the same on every route, through the one registered
handler (api/errors_http.py); no route or use case maps a refusal itself.

Each neutral error is raised from inside a real route of the in-process app (a domain function
that the route calls is made to raise it): an API route with a key, an admin's route, and one of
the App's account routes, where a key's owner reads the spec's words for three refusals of keys.
The engine's errors also come from the engine itself, through the gateway. And every subclass of
the neutral families needs an answer of its own and a case here: a new one fails until it has both.
"""
from __future__ import annotations

import gc
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
from sqlalchemy.exc import TimeoutError as PoolTimeout

import domain.account.keys as account_keys
import domain.admin.users as admin_users
from deployments.engine import EngineDead, EngineOutOfMemory, EngineRefused
from deployments.tensor_codec import TensorError
from domain import errors
from domain.completions.service import CompletionService
from domain.error_mapping import ANSWERS, OWNER_ANSWERS, as_api_error
from harvest.links import LinkRefused
from harvest.storage import StorageRefused
from ledger import errors as ledger
from ledger.accounts.keys import ACCOUNT_SUSPENDED, INVALID_API_KEY, TOO_MANY_KEYS, create_api_key, create_user
from ledger.accounts.tables import Role
from tests.own_account import sign_in
from tests.spec import assert_error

# Every family of neutral errors that a request can meet; each subclass answers on its own.
NEUTRAL_FAMILIES = (ledger.LedgerError, EngineRefused, EngineOutOfMemory, EngineDead, TensorError, LinkRefused,
                    StorageRefused, PoolTimeout)
INVALID = "invalid_request_error"
NO_RETRY = {"x-should-retry": "false"}
SKY = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2}


@dataclass(frozen=True)
class Said:
    """The spec's error object that answers a neutral error, and its headers."""

    status: int
    code: str | None
    message: str
    param: str | None = None
    type: str = INVALID
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    error: BaseException
    said: Said
    to_owner: Said | None = None  # what a key's owner reads in the App, where that differs

    @property
    def name(self) -> str:
        return type(self.error).__name__


CASES = [
    # The ledger: an operation refused (an admin's, mostly), naming the field it carries.
    Case(ledger.LedgerError("You cannot suspend yourself: ask another admin."),
         Said(400, "invalid_request", "You cannot suspend yourself: ask another admin.")),
    Case(ledger.LedgerError("You cannot change your own role: ask another admin.", param="role"),
         Said(400, "invalid_request", "You cannot change your own role: ask another admin.", "role")),
    Case(ledger.NotFound("No user has the id 1."), Said(404, None, "No user has the id 1.")),
    Case(ledger.NameRefused("A user needs a name."), Said(400, "invalid_request", "A user needs a name.", "name")),
    Case(ledger.NameTaken("'alice' has a live key named 'laptop' already; names ignore case.", "laptop"),
         Said(400, "invalid_request", "'alice' has a live key named 'laptop' already; names ignore case.", "name"),
         Said(409, "key_name_taken", errors.KEY_NAME_TAKEN_MESSAGE.format(name="laptop"), "name",
              headers=NO_RETRY)),
    Case(ledger.TooManyKeys(TOO_MANY_KEYS), Said(400, "invalid_request", TOO_MANY_KEYS, "name"),
         Said(409, "too_many_keys", TOO_MANY_KEYS, headers=NO_RETRY)),
    Case(ledger.StatusChangeRefused("A revoked key stays revoked: make a new key."),
         Said(400, "invalid_request", "A revoked key stays revoked: make a new key."),
         Said(409, "key_revoked", errors.KEY_REVOKED_FOR_GOOD_MESSAGE, headers=NO_RETRY)),
    Case(ledger.UnknownModel("The model `gpt-4` does not exist."),
         Said(400, "model_not_found", "The model `gpt-4` does not exist.", "model")),
    Case(ledger.WarmWindowRefused("A window's start_minute is a minute of the day.", "start_minute"),
         Said(400, "invalid_request", "A window's start_minute is a minute of the day.", "from")),
    # The key check: the spec's 401s.
    Case(ledger.KeyRefused(INVALID_API_KEY), Said(401, "invalid_api_key", INVALID_API_KEY)),
    Case(ledger.NoKeyGiven("No key."), Said(401, "missing_authorization", "No key.")),
    Case(ledger.UnknownKey(INVALID_API_KEY), Said(401, "invalid_api_key", INVALID_API_KEY)),
    Case(ledger.RevokedKey("Revoked."), Said(401, "key_revoked", "Revoked.")),
    Case(ledger.PausedKey("Paused."), Said(401, "key_disabled", "Paused.")),
    Case(ledger.SuspendedAccount(ACCOUNT_SUSPENDED), Said(401, "account_suspended", ACCOUNT_SUSPENDED)),
    # Looms.
    Case(ledger.LoomNotFound("No Loom has the id 1."), Said(404, None, "No Loom has the id 1.")),
    Case(ledger.LoomConflict("The Node grows."), Said(409, None, "The Node grows.", headers=NO_RETRY)),
    # The App's access.
    Case(ledger.AccessRefused("Not so."), Said(400, "invalid_request", "Not so.")),
    Case(ledger.ApplicationExists("Applied already."), Said(409, "application_exists", "Applied already.")),
    Case(ledger.LinkExpired("That link did not work."), Said(410, "link_expired", "That link did not work.")),
    Case(ledger.SignInFailed("Wrong."), Said(401, "sign_in_failed", "Wrong.")),
    Case(ledger.SignInSuspended(ACCOUNT_SUSPENDED), Said(403, "account_suspended", ACCOUNT_SUSPENDED)),
    Case(ledger.PasswordRefused("Too short."), Said(400, "invalid_request", "Too short.", "password")),
    Case(ledger.TooManyTries("Try again in 17 seconds.", 17),
         Said(429, "too_many_tries", "Try again in 17 seconds.", type="rate_limit_error",
              headers={"Retry-After": "17"})),
    Case(ledger.EmailRefused("Not an email."), Said(400, "invalid_request", "Not an email.", "email")),
    Case(ledger.FormRefused("Fill in organization.", "organization"),
         Said(400, "invalid_request", "Fill in organization.", "organization")),
    # The App's keys and token requests.
    Case(ledger.OwnKeyNotFound("You have no API key with the id 1."),
         Said(404, "key_not_found", "You have no API key with the id 1.")),
    Case(ledger.TokenRequestRefused("Say what the tokens are for.", "project"),
         Said(400, "invalid_request", "Say what the tokens are for.", "project")),
    Case(ledger.TokenRequestWaiting("One at a time."),
         Said(409, "token_request_waiting", "One at a time.", headers=NO_RETRY)),
    # The App's Playground Runs.
    Case(ledger.RunNotFound("You have no Run with the id 1."), Said(404, None, "You have no Run with the id 1.")),
    # The engine and its checks.
    Case(EngineRefused("Layer 40 is not there.", "output_residual_stream"),
         Said(400, "invalid_request", "Layer 40 is not there.", "output_residual_stream")),
    Case(EngineRefused("This model's maximum context length is 2048 tokens.", "prompt"),
         Said(400, "context_length_exceeded", "This model's maximum context length is 2048 tokens.", "prompt")),
    Case(EngineRefused("The engine blames the request.", "prompt", code="vllm_invalid_request"),
         Said(400, "vllm_invalid_request", "The engine blames the request.", "prompt", type="upstream_error",
              headers=NO_RETRY)),
    Case(EngineOutOfMemory("CUDA out of memory"),
         Said(502, "vllm_oom", "Inference ran out of GPU memory: CUDA out of memory", type="upstream_error",
              headers={"Retry-After": "30"})),
    Case(EngineDead("the core process exited"),
         Said(502, "vllm_engine_dead", "Inference's engine stopped: the core process exited", type="upstream_error",
              headers={"Retry-After": "30"})),
    Case(TensorError("data is not base64"),
         Said(400, "invalid_request", "An encoded Steering vector cannot be read: data is not base64.",
              "apply_steering_vectors")),
    # A harvest's files.
    Case(LinkRefused("This link is not valid."), Said(403, "link_invalid", "This link is not valid.")),
    Case(LinkRefused("This link expired.", reason="expired"), Said(403, "link_expired", "This link expired.")),
    Case(StorageRefused("'x' is not a file of a harvest."), Said(404, None, "'x' is not a file of a harvest.")),
    # The database's pool.
    Case(PoolTimeout("QueuePool limit of size 1 overflow 0 reached"),
         Said(503, "db_pool_exhausted", errors.DB_POOL_EXHAUSTED_MESSAGE, type="service_unavailable",
              headers={"Retry-After": "1"})),
]


# -- the routes -----------------------------------------------------------------------------------------

def raising(error: BaseException) -> Callable[..., Any]:
    async def raise_it(*args: Any, **kwargs: Any) -> Any:
        raise error
    return raise_it


async def an_admins_key(stack: Any) -> str:
    async with stack.services.ledger.write_sessions() as session:
        admin = await create_user(session, f"admin-{uuid.uuid4().hex[:12]}")
        admin.role = Role.admin
        _, key = await create_api_key(session, admin.id, "admin")
        await session.commit()
    return key


class Route:
    """A real route of the app, with what it needs to get past its checks to the domain function
    that the test makes raise."""

    reader_is_owner = False

    async def enter(self, stack: Any) -> None:
        self.stack = stack

    async def answer(self, monkeypatch: pytest.MonkeyPatch, error: BaseException) -> Any:
        raise NotImplementedError


class Completions(Route):
    """POST /v1/completions with the stack's key: CompletionService.create raises."""

    async def answer(self, monkeypatch: pytest.MonkeyPatch, error: BaseException) -> Any:
        monkeypatch.setattr(CompletionService, "create", raising(error))
        return await self.stack.http.post("/v1/completions", json=SKY, headers=self.stack.auth())


class AdminUsers(Route):
    """GET /v1/admin/users with an admin's key: domain.admin.users.list_users raises."""

    async def enter(self, stack: Any) -> None:
        await super().enter(stack)
        self.key = await an_admins_key(stack)

    async def answer(self, monkeypatch: pytest.MonkeyPatch, error: BaseException) -> Any:
        monkeypatch.setattr(admin_users, "list_users", raising(error))
        return await self.stack.http.get("/v1/admin/users", headers={"Authorization": f"Bearer {self.key}"})


class AccountKeys(Route):
    """GET /account/keys, signed in to the App: domain.account.keys.list_keys raises."""

    reader_is_owner = True

    async def enter(self, stack: Any) -> None:
        await super().enter(stack)
        self.account = await sign_in(stack, key_name=None)

    async def answer(self, monkeypatch: pytest.MonkeyPatch, error: BaseException) -> Any:
        monkeypatch.setattr(account_keys, "list_keys", raising(error))
        return await self.account.call("GET", "/account/keys")


def check(response: Any, said: Said) -> str | None:
    """None when the answer is `said`, else why not."""
    try:
        assert_error(response, said.status, said.code, message=said.message, param=said.param, type=said.type,
                     headers=said.headers)
    except AssertionError as error:
        return f"{error!r}: {response.status_code} {response.text}"
    return None


@pytest.mark.parametrize("route", [Completions(), AdminUsers(), AccountKeys()], ids=lambda route: type(route).__name__)
async def test_each_neutral_error_answers_the_spec_error_through_a_route(fake_stack, monkeypatch, route):
    await route.enter(fake_stack)
    wrong = {}
    for case in CASES:
        said = case.to_owner if route.reader_is_owner and case.to_owner else case.said
        with monkeypatch.context() as patch:
            why = check(await route.answer(patch, case.error), said)
        if why:
            wrong[f"{case.name}({case.error})"] = why
    assert wrong == {}


ENGINE_CASES = [case for case in CASES if isinstance(case.error, (EngineRefused, EngineOutOfMemory, EngineDead))]


@pytest.mark.parametrize("case", ENGINE_CASES, ids=lambda case: f"{case.name}:{case.said.code}")
async def test_the_engines_errors_answer_the_same_from_the_engine_through_the_gateway(fake_stack, case):
    fake_stack.engine.fail_before_first = case.error
    response = await fake_stack.http.post("/v1/completions", json=SKY, headers=fake_stack.auth())
    assert check(response, case.said) is None


# -- every neutral error has an answer of its own, and a case here ------------------------------------------

def neutral_classes(families: tuple[type[BaseException], ...] = NEUTRAL_FAMILIES) -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    todo = list(families)
    while todo:
        kind = todo.pop()
        if kind not in found:
            found.add(kind)
            todo.extend(kind.__subclasses__())
    return found


def unanswered(classes: set[type[BaseException]]) -> list[str]:
    """Classes that would answer with an ancestor's answer (or none), not one chosen for them."""
    return sorted(kind.__name__ for kind in classes if kind not in ANSWERS)


def without_a_case(classes: set[type[BaseException]]) -> list[str]:
    tried = {type(case.error) for case in CASES}
    return sorted(kind.__name__ for kind in classes if kind not in tried)


def products(classes: set[type[BaseException]]) -> set[type[BaseException]]:
    """Leave out what a test of this module defines for itself."""
    return {kind for kind in classes if kind.__module__ != __name__}


def test_every_neutral_error_has_an_answer_of_its_own_and_a_case_through_the_routes():
    classes = products(neutral_classes())
    assert unanswered(classes) == []
    assert without_a_case(classes) == []
    assert set(OWNER_ANSWERS) <= set(ANSWERS)  # an admin reads an answer to each of them too


def test_a_new_neutral_error_without_an_answer_fails_the_check():
    class QuotaRefused(ledger.LedgerError):
        """A new refusal that nobody mapped: it would answer as a LedgerError, a 400 nobody chose."""

    class ShardRefused(StorageRefused):
        pass

    try:
        classes = neutral_classes()
        assert unanswered(classes) == ["QuotaRefused", "ShardRefused"]
        assert without_a_case(classes) == ["QuotaRefused", "ShardRefused"]
        # At run time it still answers as its family does, never a 500.
        answered = as_api_error(QuotaRefused("Not now."))
        assert isinstance(answered, errors.InvalidRequest) and answered.message == "Not now."
    finally:
        del QuotaRefused, ShardRefused
        gc.collect()  # out of __subclasses__(), for the other tests
