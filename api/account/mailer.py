"""The App's Mailer from the settings: SMTP with ACS_SMTP_URL, else .eml files in ACS_MAIL_OUTBOX."""
from __future__ import annotations

from api.settings import Settings
from ledger.mail import Mailer, OutboxFolderMailer, SmtpMailer


def mailer_of(settings: Settings) -> Mailer:
    url = settings.smtp_url.get_secret_value().strip() if settings.smtp_url is not None else ""
    if url:
        return SmtpMailer(url, settings.mail_from)
    return OutboxFolderMailer(settings.mail_outbox, settings.mail_from)
