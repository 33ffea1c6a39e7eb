"""Errors of the ledger's own operations (admin commands, key management).

Refusals of an operator's command, and of a request's key (`KeyRefused`),
which the API maps to its 401s. Nothing here knows HTTP.
"""
from __future__ import annotations


class LedgerError(ValueError):
    """A refused ledger operation; its message is meant for the operator."""


class NotFound(LedgerError):
    pass


class NameRefused(LedgerError):
    pass


class TooManyKeys(LedgerError):
    pass


class StatusChangeRefused(LedgerError):
    pass


class KeyRefused(LedgerError):
    """The key check refused a request's key. The API answers each kind with
    the 401 of the spec (`domain/error_mapping.py`); the message is the spec's."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NoKeyGiven(KeyRefused):
    pass


class UnknownKey(KeyRefused):
    pass


class RevokedKey(KeyRefused):
    pass


class PausedKey(KeyRefused):
    pass


class SuspendedAccount(KeyRefused):
    pass


class LoomNotFound(LedgerError):
    """None of the User's live Looms or Nodes has the id (another User's too)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LoomConflict(LedgerError):
    """The Nodes that a change touches are not in a state for it; the API's 409."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class WarmWindowRefused(LedgerError):
    """A warm window or a Warm now that cannot be kept as given; `field` names the value
    (days, start_minute, end_minute, time_zone, hours) so a route can say which."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.message, self.field = message, field


class UnknownModel(NotFound):
    """A warm window for a model that this platform does not serve."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# -- account (B): the App's keys and token requests ---------------------------------------------

class NameTaken(NameRefused):
    """Another live key of the User has this name, whatever the case; `name` is that key's."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.message, self.name = message, name


class OwnKeyNotFound(NotFound):
    """None of the signed-in User's keys has the id (another User's key included)."""


class TokenRequestRefused(LedgerError):
    """A token request's answer that cannot be kept as given; `field` names the question."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.message, self.field = message, field


class TokenRequestWaiting(LedgerError):
    """The User has a request waiting: one at a time (the API's 409)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# -- access (A): the App's sign-in, Applications, Invites and password links -----------------------

class AccessRefused(LedgerError):
    """A refusal of the App's access routes; the API maps each kind to its answer (domain/error_mapping.py)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ApplicationExists(AccessRefused):
    """An Application (not rejected) or a User has the email already."""


class LinkExpired(AccessRefused):
    """A password link or an Invite that is unknown, used, ended by a newer one, or too old."""


class SignInFailed(AccessRefused):
    """No User has this email and password."""


class SignInSuspended(AccessRefused):
    """The password is right, but the User's access is suspended."""


class PasswordRefused(AccessRefused):
    """A new password that is too short (or too long)."""


class TooManyTries(AccessRefused):
    """Past 5 tries a minute from one address; `wait_s` is how long until the next try counts."""

    def __init__(self, message: str, wait_s: int) -> None:
        super().__init__(message)
        self.wait_s = wait_s


class EmailRefused(AccessRefused):
    """Text that does not look like an email address."""


class FormRefused(AccessRefused):
    """A field of the Apply form that is missing or too long; `field` names it."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field
