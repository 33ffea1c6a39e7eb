"""Passwords of the App's sign-in: kept as argon2id hashes only (argon2-cffi's defaults, RFC 9106's
second recommended setting)."""
from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from ledger.errors import PasswordRefused

MIN_LENGTH = 8
TOO_SHORT = "Enter a password of at least 8 characters."
# An argon2 hash can hold any text, but a very long password is a way to make the server work.
MAX_LENGTH = 1000
TOO_LONG = "Enter a password of at most 1000 characters."

_HASHER = PasswordHasher()
# Checked when no User has the email, so a wrong address takes as long as a wrong password.
_DUMMY_HASH = _HASHER.hash("not anyone's password")


def check_new(password: str) -> str:
    if len(password) < MIN_LENGTH:
        raise PasswordRefused(TOO_SHORT)
    if len(password) > MAX_LENGTH:
        raise PasswordRefused(TOO_LONG)
    return password


def hash_password(password: str) -> str:
    return _HASHER.hash(check_new(password))


def verify(password_hash: str | None, password: str) -> bool:
    """Whether the password is the one hashed; None (no password yet) takes the same time and fails."""
    try:
        return _HASHER.verify(password_hash or _DUMMY_HASH, password) and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False
