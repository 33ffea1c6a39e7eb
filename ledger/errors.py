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
    the 401 of the spec (`api/error_mapping.py`); the message is the spec's."""

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
