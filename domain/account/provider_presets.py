"""The sign-in providers that this install offers, from its settings, and the words that the App shows
for each of their refusals (the one place that holds them).

GitHub, Google and Hugging Face are presets: a self-hoster sets a client id and secret (ACS_GITHUB_*,
ACS_GOOGLE_*, ACS_HUGGING_FACE_*). ACS_OIDC_NAME, ACS_OIDC_ISSUER, ACS_OIDC_CLIENT_ID and
ACS_OIDC_CLIENT_SECRET add any OpenID Connect issuer (a company's Keycloak, Dex, Authentik...), whose
button reads "Continue with <ACS_OIDC_NAME>".

Google and Hugging Face are OpenID Connect issuers: their ID token says who signed in and whether they
verified the email. GitHub is OAuth 2 without OpenID Connect: it issues no ID token, so the one way to
learn a verified email is its `GET /user/emails` (and `GET /user` for the account's id), read once with the
sign-in's short-lived token, inside the callback, in the place of an ID token. The token is dropped then
and never kept; nothing is read from GitHub at any other time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import SecretStr

from domain.settings import Settings
from ledger.accounts.keys import ACCOUNT_SUSPENDED

GITHUB_AUTHORIZE = "https://github.com/login/oauth/authorize"
GITHUB_TOKEN = "https://github.com/login/oauth/access_token"
GITHUB_API = "https://api.github.com"
GENERIC = "oidc"


@dataclass(frozen=True)
class Provider:
    """One offered provider: `id` is its part of the App's addresses, `name` its words on the buttons."""

    id: str
    name: str
    client_id: str
    client_secret: str
    kind: Literal["oidc", "github"]
    issuer: str = ""  # an OpenID Connect issuer's; "" for GitHub
    scope: str = "openid email"


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value().strip() if value is not None else ""


def offered(settings: Settings) -> list[Provider]:
    """The providers whose client id and secret are both set, in the order of the buttons."""
    found: list[Provider] = []

    def add(id_: str, name: str, client_id: str | None, secret: SecretStr | None, kind: Literal["oidc", "github"],
            issuer: str = "", scope: str = "openid email") -> None:
        if (client_id or "").strip() and _secret(secret) and (kind == "github" or issuer.strip()):
            found.append(Provider(id_, name, (client_id or "").strip(), _secret(secret), kind,
                                  issuer.strip().rstrip("/"), scope))

    add("github", "GitHub", settings.github_client_id, settings.github_client_secret, "github", scope="user:email")
    add("google", "Google", settings.google_client_id, settings.google_client_secret, "oidc",
        "https://accounts.google.com")
    add("hugging-face", "Hugging Face", settings.hugging_face_client_id, settings.hugging_face_client_secret, "oidc",
        "https://huggingface.co")
    add(GENERIC, (settings.oidc_name or "").strip() or "OpenID Connect", settings.oidc_client_id,
        settings.oidc_client_secret, "oidc", settings.oidc_issuer or "")
    return found


def provider_of(settings: Settings, provider_id: str) -> Provider | None:
    return next((provider for provider in offered(settings) if provider.id == provider_id), None)


# What the App says when a provider's sign-in or link does not go through: the callback sends the App's
# page the code (?problem=<code>), and the page shows these words ({provider}: the provider's name, {n}:
# the seconds to wait). GET /account/providers hands them to the App, so they are written here alone.
MESSAGES = {
    "email_not_verified": "{provider} has not verified your email address. Verify it at the provider, then try "
                          "again.",
    "no_user": "No User of ACS Infra has the email address that {provider} gave. A provider never makes a User: "
               "apply for access first.",
    "linked_elsewhere": "This {provider} account is linked to another User of ACS Infra.",
    "other_account": "Another {provider} account is linked to your User. Sign in with that one, or unlink it on "
                     "Profile first.",
    "email_mismatch": "{provider} gave another email address than the one that you sign in with here. Link the "
                      "{provider} account that has verified your email address.",
    "expired": "The sign-in with {provider} took too long, or began in another browser. Try again.",
    "failed": "{provider} did not sign you in. Try again.",
    "unavailable": "{provider} did not answer. Try again later.",
    "too_many_tries": "Too many tries to sign in. Wait {n} seconds.",
    "account_suspended": ACCOUNT_SUSPENDED,  # the same words as a password sign-in's
}
LAST_WAY = ("You cannot unlink your last way to sign in. Set a password first, with Reset your password on "
            "Profile.")
SESSION_TOO_OLD = "To unlink, your session must be less than a day old. Sign out and sign in again first."
NOT_LINKED = "{provider} is not linked to your User."

