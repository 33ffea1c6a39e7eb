"""The words of the App's mails: the spec's subjects and link texts ("Get access" in docs.md).

Each function returns (subject, body) for `ledger.accounts.mail.queue_mail`; `base` is the App's public URL.
"""
from __future__ import annotations

APPROVED = "Your ACS Infra application is approved"
REJECTED = "Your ACS Infra application"
SET_PASSWORD = "Set your password"
RESET_PASSWORD = "Reset your password"
SIGN_OFF = "\n\nACS Infra\nhttps://v2.infra.acsresearch.org\n"


def app_url(base: str, path: str) -> str:
    return base.rstrip("/") + path


def approved(name: str, base: str, token: str) -> tuple[str, str]:
    link = app_url(base, f"/set-password?token={token}")
    return APPROVED, (
        f"Hello {name},\n\nAn admin approved your application for ACS Infra. You have a monthly allowance "
        f"of tokens, so you can send requests as soon as you have an API key.\n\n"
        f"Choose your password:\n{link}\n\nThe link works once, for 7 days. Then sign in to the App at "
        f"{app_url(base, '/sign-in')} to make API keys and run prompts." + SIGN_OFF)


def rejected(name: str, base: str, note: str = "") -> tuple[str, str]:
    reason = f"\n\nThe admin wrote: {note}" if note.strip() else ""
    return REJECTED, (
        f"Hello {name},\n\nAn admin did not approve your application for ACS Infra.{reason}\n\n"
        f"You can apply again with the Apply form:\n{app_url(base, '/apply')}" + SIGN_OFF)


def set_password(base: str, token: str) -> tuple[str, str]:
    link = app_url(base, f"/set-password?token={token}")
    return SET_PASSWORD, (
        f"Hello,\n\nYou asked for a link to set the password of your ACS Infra account.\n\n"
        f"Choose your password:\n{link}\n\nThe link works once, for 1 hour. If you did not ask for it, "
        "you can ignore this email." + SIGN_OFF)


def reset_password(base: str, token: str) -> tuple[str, str]:
    link = app_url(base, f"/reset-password?token={token}")
    return RESET_PASSWORD, (
        f"Hello,\n\nYou asked to reset the password of your ACS Infra account.\n\n"
        f"Choose a new password:\n{link}\n\nThe link works once, for 1 hour. A new password signs you out "
        "everywhere. If you did not ask for it, you can ignore this email: your password stays." + SIGN_OFF)


def invite_link(base: str, token: str) -> str:
    return app_url(base, f"/apply?invite={token}")
