"""Errors of the ledger's own operations (admin commands, key management).

Authentication raises the API's errors (`api.errors`) instead, since its
answers are the spec's 401s. These are refusals of an operator's command.
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
