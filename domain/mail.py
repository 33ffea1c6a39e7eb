"""The App's Mailer from the settings: SMTP with ACS_SMTP_URL, else .eml files in ACS_MAIL_OUTBOX; the
address that its mails link to; and where the team's mail goes (ACS_TEAM_EMAIL)."""
from __future__ import annotations

from domain.settings import Settings
from ledger.accounts.mail import Mailer, OutboxFolderMailer, SmtpMailer
from ledger.accounts.team_mail import TeamMail


def mailer_of(settings: Settings) -> Mailer:
    url = settings.smtp_url.get_secret_value().strip() if settings.smtp_url is not None else ""
    if url:
        return SmtpMailer(url, settings.mail_from)
    return OutboxFolderMailer(settings.mail_outbox, settings.mail_from)


def mail_base_url(settings: Settings) -> str:
    """Where the mails' links point: ACS_PUBLIC_BASE_URL alone, never a request's Host, which its
    sender chooses (a reset link to someone else's host hands over the token). Only in development
    may it be unset (the settings refuse it elsewhere): then the embedded default's own address."""
    return ((settings.public_base_url or "").strip() or f"http://127.0.0.1:{settings.port}").rstrip("/")


def team_mail_of(settings: Settings) -> TeamMail | None:
    """None without ACS_TEAM_EMAIL: then no mail goes to the team."""
    to = (settings.team_email or "").strip()
    return TeamMail(to, mail_base_url(settings)) if to else None
