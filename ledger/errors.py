"""Errors of the ledger's own operations (admin commands, key management).

Refusals of an operator's command, of a request's key (`KeyRefused`), of the App's
access, keys and token requests, and of a Loom's change. Nothing here knows HTTP: the
API answers each kind in one place (`domain/error_mapping.py`), whoever called.
"""
from __future__ import annotations


class LedgerError(ValueError):
    """A refused ledger operation; its message is meant for the operator.

    `param` names the request's field that the refusal is about, where one is: set where
    it is raised (a class's own, or `param=`), or by the route that read the value
    (`read_field` of domain/operations/arguments.py). The API's error names it.
    """

    param: str | None = None

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        if param is not None:
            self.param = param


class NotFound(LedgerError):
    pass


class NameRefused(LedgerError):
    """A user's or a key's name that cannot be kept; it is the request's `name`."""

    param = "name"


class TooManyKeys(LedgerError):
    """An 11th live key; the admin's route names the new key's `name` (the App answers 409)."""

    param = "name"


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
        super().__init__(message, param=field)
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

    param = "password"


class TooManyTries(AccessRefused):
    """Past 5 tries a minute from one address; `wait_s` is how long until the next try counts."""

    def __init__(self, message: str, wait_s: int) -> None:
        super().__init__(message)
        self.wait_s = wait_s


class EmailRefused(AccessRefused):
    """Text that does not look like an email address."""

    param = "email"


class FormRefused(AccessRefused):
    """A field of the Apply form that is missing or too long; `field` names it."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = self.param = field


# -- the Playground's Runs --------------------------------------------------------------------------

class RunNotFound(NotFound):
    """None of the User's Runs (not deleted) has the id, or the group id; another User's too."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
