"""The one error hierarchy of the API.

Routes and services raise these; `api.app` maps each to the spec's error
object in one place (`error_response`). A subclass fixes status, type and
code; the message and param come from where the error is raised.
"""
from __future__ import annotations

from typing import Any


class ApiError(Exception):
    status: int = 500
    type: str = "internal_error"
    code: str | None = "internal_error"
    # x-should-retry: false on the answers the spec's Headers table names.
    should_retry: bool | None = None
    retryable: bool | None = None
    retry_after: int | None = None

    def __init__(
        self,
        message: str,
        param: str | None = None,
        *,
        retry_after: int | None = None,
        upstream_status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if retry_after is not None:
            self.retry_after = retry_after
        self.upstream_status = upstream_status
        self.extra_headers = headers or {}

    def body(self, request_id: str | None, *, in_stream: bool = False) -> dict[str, Any]:
        error: dict[str, Any] = {
            "message": self.message,
            "type": self.type,
            "param": self.param,
            "code": self.code,
        }
        retryable = self.retryable
        if retryable is None and in_stream:
            retryable = False
        if retryable is not None:
            error["retryable"] = retryable
            if retryable and self.retry_after is not None:
                error["retry_after_seconds"] = self.retry_after
        if self.upstream_status is not None:
            error["upstream_status"] = self.upstream_status
        if in_stream and request_id:
            error["request_id"] = request_id
        return {"error": error, "request_id": request_id}

    def headers(self) -> dict[str, str]:
        headers = dict(self.extra_headers)
        if self.retry_after is not None:
            headers["Retry-After"] = str(self.retry_after)
        if self.should_retry is False:
            headers["x-should-retry"] = "false"
        return headers


# 400 ----------------------------------------------------------------------
class InvalidRequest(ApiError):
    status, type, code = 400, "invalid_request_error", "invalid_request"


class BadJson(ApiError):
    status, type, code = 400, "invalid_request_error", "bad_json"


class ModelNotFound(ApiError):
    status, type, code = 400, "invalid_request_error", "model_not_found"


class ContextLengthExceeded(ApiError):
    status, type, code = 400, "invalid_request_error", "context_length_exceeded"


class DeadlineInfeasible(ApiError):
    status, type, code = 400, "invalid_request_error", "deadline_infeasible"
    should_retry = False


class ChatCompletionsUnsupported(ApiError):
    status, type, code = 400, "invalid_request_error", "chat_completions_unsupported"


# 401 ----------------------------------------------------------------------
class AuthError(ApiError):
    status, type = 401, "invalid_request_error"


class MissingAuthorization(AuthError):
    code = "missing_authorization"


class InvalidApiKey(AuthError):
    code = "invalid_api_key"


class KeyRevoked(AuthError):
    code = "key_revoked"


class KeyDisabled(AuthError):
    code = "key_disabled"


class AccountSuspended(AuthError):
    code = "account_suspended"


# 404 / 405 / 413 ------------------------------------------------------------
class NotFound(ApiError):
    status, type, code = 404, "invalid_request_error", None


class MethodNotAllowed(ApiError):
    status, type, code = 405, "invalid_request_error", None


class RequestTooLarge(ApiError):
    status, type, code = 413, "invalid_request_error", "request_too_large"
    should_retry = False


# 500 ----------------------------------------------------------------------
class InternalError(ApiError):
    status, type, code = 500, "internal_error", "internal_error"
    should_retry = False


# 503 ----------------------------------------------------------------------
class CircuitOpen(ApiError):
    status, type, code = 503, "upstream_error", "circuit_open"
    retryable = True


class DbPoolExhausted(ApiError):
    """Every connection of the API's database pool was busy: nothing ran, nothing held."""

    status, type, code, retry_after = 503, "service_unavailable", "db_pool_exhausted", 1


DB_POOL_EXHAUSTED_MESSAGE = "The API's database was busy. Nothing ran and the API held no tokens."


# Inference ----------------------------------------------------------------
class UpstreamError(ApiError):
    """A failure of Inference: type upstream_error, with `retryable`."""

    status, type = 502, "upstream_error"


class UpstreamUnreachable(UpstreamError):
    code, retryable, retry_after = "upstream_unreachable", True, 30


class VllmOom(UpstreamError):
    code, retryable, retry_after = "vllm_oom", True, 30


class VllmEngineDead(UpstreamError):
    code, retryable, retry_after = "vllm_engine_dead", True, 30


class UpstreamServerError(UpstreamError):
    code = "upstream_server_error"

    def __init__(self, message: str, *, upstream_status: int | None = None, **kwargs: Any) -> None:
        super().__init__(message, upstream_status=upstream_status, **kwargs)
        # The spec: after a 502/503/504 it is retryable with Retry-After: 30,
        # after any other status (or none: our own check of the answer) not.
        if upstream_status in (502, 503, 504):
            self.retryable, self.retry_after = True, 30
        else:
            self.retryable, self.should_retry = False, False


class UpstreamRefusal(UpstreamError):
    """Inference failed with a 5xx, and its message says the request is at fault: a 400 that
    the circuit breaker does not count, as it says nothing of the model's health."""

    status, retryable, should_retry = 400, False, False

    def __init__(self, message: str, param: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, param, upstream_status=500, **kwargs)


class VllmInvalidRequest(UpstreamRefusal):
    code = "vllm_invalid_request"


class VllmContextLength(UpstreamRefusal):
    code = "vllm_context_length"


class UpstreamDeadline(UpstreamError):
    status, code, retryable, should_retry = 504, "upstream_deadline", False, False


UNREACHABLE_MESSAGE = "Could not reach Inference: Connection error."
DEADLINE_MESSAGE = "Could not reach Inference: Request timed out."
STREAM_CUT_MESSAGE = "Inference ended the stream before it was complete."
ANSWER_MISFIT_PREFIX = "Inference's answer does not fit the request: "


# 429 tokens and spending ------------------------------------------------------
class BudgetExceeded(ApiError):
    status, type, code, should_retry = 429, "invalid_request_error", "budget_exceeded", False


class SpendCap(ApiError):
    status, type, code, should_retry, retry_after = 429, "invalid_request_error", "spend_cap", False, 3600


SPEND_CAP_MESSAGE = (
    "New GPU work is paused to limit spending. Work that already runs finishes; "
    "try again in an hour."
)


# 429 traffic ------------------------------------------------------------------
# Messages live in domain/traffic/messages.py; both answers carry Retry-After and
# no x-should-retry, so the openai SDK waits and sends the request again.
class RateLimited(ApiError):
    status, type, code = 429, "rate_limit_error", "rate_limited"


class QueueFull(ApiError):
    status, type, code, retry_after = 429, "rate_limit_error", "queue_full", 5


# 409 idempotency --------------------------------------------------------------
class IdempotencyRunning(ApiError):
    status, type, code, retry_after = 409, "invalid_request_error", "running", 1


class IdempotencyNoAnswer(ApiError):
    status, type, code, should_retry = 409, "invalid_request_error", "no_answer", False


class IdempotencyConflict(ApiError):
    status, type, code, should_retry = 409, "invalid_request_error", "idempotency_conflict", False


# Jobs -----------------------------------------------------------------------------
class JobNotFound(ApiError):
    status, type, code = 404, "invalid_request_error", "job_not_found"


class JobCancelled(ApiError):
    status, type, code, should_retry = 409, "invalid_request_error", "job_cancelled", False


class JobResultExpired(ApiError):
    status, type, code = 410, "invalid_request_error", "job_result_expired"


class JobFailed(ApiError):
    status, type, code, should_retry = 500, "internal_error", "job_failed", False


class JobCapacity(ApiError):
    status, type, code, should_retry = 429, "invalid_request_error", "job_capacity", False


# Harvest download links ------------------------------------------------------------
# The spec names no code for these: a link's own 403s, so that a program can tell an
# expired link (read the harvest again for new ones) from one that was altered.
class HarvestLinkRefused(ApiError):
    status, type, code = 403, "invalid_request_error", "link_invalid"


class HarvestLinkExpired(HarvestLinkRefused):
    code = "link_expired"


class HarvestLinkInvalid(HarvestLinkRefused):
    code = "link_invalid"


class RangeNotSatisfiable(ApiError):
    status, type, code = 416, "invalid_request_error", None


# Harvests ---------------------------------------------------------------------------
class HarvestUnsupported(ApiError):
    """A served model that takes no harvests; `param` is `model`."""

    status, type, code = 400, "invalid_request_error", "harvest_unsupported"


class HarvestJobNotFound(ApiError):
    status, type, code = 404, "invalid_request_error", "harvest_job_not_found"


class HarvestNotCancellable(ApiError):
    status, type, code, should_retry = 409, "invalid_request_error", "harvest_not_cancellable", False


class HarvestQuotaExceeded(ApiError):
    """The key started its most harvests this UTC month: waiting a little changes nothing."""

    status, type, code, should_retry = 429, "invalid_request_error", "harvest_quota_exceeded", False


class HarvestConcurrencyExceeded(ApiError):
    status, type, code, retry_after = 429, "invalid_request_error", "harvest_concurrency_exceeded", 30


class HarvestCapacityExceeded(ApiError):
    status, type, code, retry_after = 429, "invalid_request_error", "harvest_capacity_exceeded", 30


# -- Looms ---------------------------------------------------------------------------------------------

class LoomConflict(ApiError):
    """The Node is not in a state for this action (the spec's 409 with code null)."""

    status, type, code, should_retry = 409, "invalid_request_error", None, False


# -- Admin routes ------------------------------------------------------------------------------------------

class AdminOnly(ApiError):
    """A valid key of a User who is not an admin, on a route under /v1/admin."""

    status, type, code, should_retry = 403, "invalid_request_error", "admin_only", False


ADMIN_ONLY_MESSAGE = "This route is for admins."


# -- account (A): the App's account routes (/account) ------------------------------------------------------

class SessionRequired(AuthError):
    """An API key (an Authorization header) on an /account route: those take the App's session only."""

    code = "session_required"


SESSION_REQUIRED_MESSAGE = "The App's account routes take a session from sign-in, not an API key."


class SessionEnded(AuthError):
    """No session cookie, or the session signed out, expired, or was ended by a new password or a suspension."""

    code = "session_ended"


SESSION_ENDED_MESSAGE = "Your session has ended."


class CsrfFailed(ApiError):
    status, type, code = 403, "invalid_request_error", "csrf_failed"


CSRF_FAILED_MESSAGE = "The request lacks the App's CSRF token. Reload the page and try again."


class SignInFailed(AuthError):
    code = "sign_in_failed"


class SignInSuspended(ApiError):
    """The right password of a suspended User: 403 with the 401's code and message (the spec)."""

    status, type, code = 403, "invalid_request_error", "account_suspended"


class TooManyTries(ApiError):
    """Past 5 tries a minute from one address to sign in, ask for a link or set a password."""

    status, type, code = 429, "rate_limit_error", "too_many_tries"


class LastSignInMethod(ApiError):
    """Unlinking a provider that is the User's last way to sign in (spec: Link or unlink a provider)."""

    status, type, code = 409, "invalid_request_error", "last_sign_in_method"


class SessionTooOld(ApiError):
    """Unlinking a provider from a session that began a day ago or more: sign in again first."""

    status, type, code = 403, "invalid_request_error", "session_too_old"


class AccessLinkExpired(ApiError):
    """A password link or an Invite that no longer works (unknown, used, replaced, or too old)."""

    status, type, code = 410, "invalid_request_error", "link_expired"


class ApplicationExists(ApiError):
    status, type, code = 409, "invalid_request_error", "application_exists"


# -- account (B): the App's keys, usage and token requests --------------------------------------------

class TooManyKeys(ApiError):
    """An 11th key that is not revoked (spec: Limits, "API keys")."""

    status, type, code, should_retry = 409, "invalid_request_error", "too_many_keys", False


class KeyNameTaken(ApiError):
    status, type, code, should_retry = 409, "invalid_request_error", "key_name_taken", False


class KeyNotFound(ApiError):
    """No key of the signed-in User has the id: another User's key is not there for them."""

    status, type, code = 404, "invalid_request_error", "key_not_found"


class KeyRevokedForGood(ApiError):
    """Rename, pause or resume of a revoked key: a revoke cannot be undone."""

    status, type, code, should_retry = 409, "invalid_request_error", "key_revoked", False


class TokenRequestWaiting(ApiError):
    status, type, code, should_retry = 409, "invalid_request_error", "token_request_waiting", False


KEY_NAME_TAKEN_MESSAGE = ("You have a key named {name!r} already. No two of your keys can share a name, "
                          "whatever the case of its letters.")
KEY_REVOKED_FOR_GOOD_MESSAGE = "This API key has been revoked. Make a new key."
