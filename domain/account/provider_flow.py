"""A provider's sign-in, as the protocol goes: the authorization address (with state, nonce and PKCE), the
flow's own facts kept in a signed, short-lived cookie between the two legs, and the callback's code
exchanged for who signed in: the provider's subject, the email and whether the provider verified it.

Authlib's OAuth 2 client makes the authorization address and exchanges the code (PKCE S256); joserfc
checks the ID token's signature against the issuer's published keys, and this module its claims (issuer,
audience, expiry, nonce). The tokens live in this module's locals for the callback's few lines, and are
never written anywhere.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from authlib.integrations.httpx_client import AsyncOAuth2Client
from joserfc import jwt
from joserfc.jwk import KeySet

from domain.account.provider_presets import GITHUB_API, GITHUB_AUTHORIZE, GITHUB_TOKEN, Provider

FLOW_LIFETIME_S = 600  # the provider's page has ten minutes to send the browser back
LEEWAY_S = 60  # the clocks of the issuer and of this host may differ this much
DISCOVERY_KEPT_S = 3600.0
TIMEOUT_S = 15.0
_discovered: dict[str, tuple[float, dict[str, Any]]] = {}


class ProviderRefused(Exception):
    """A provider's sign-in or link that does not go through: `code` is a key of provider_presets.MESSAGES
    (the App's page shows its words), `wait_s` the seconds to wait after too many tries. The callback's route
    turns it into the address of the App's page, never into an error answer."""

    def __init__(self, code: str, detail: str = "", wait_s: int = 0) -> None:
        super().__init__(detail or code)
        self.code = code
        self.wait_s = wait_s


@dataclass(frozen=True)
class Flow:
    """What the callback must find again: which provider and why, the state, nonce and PKCE verifier that
    the authorization request carried, the App's page to open after, and (to link) the signed-in User."""

    provider: str
    intent: str  # "sign-in" or "link"
    state: str
    nonce: str
    verifier: str
    next: str
    user_id: str
    expires: int

    @classmethod
    def new(cls, provider: str, intent: str, next_page: str, user_id: uuid.UUID | None, now_s: float) -> Flow:
        return cls(provider, intent, secrets.token_urlsafe(24), secrets.token_urlsafe(24), secrets.token_urlsafe(48),
                   next_page, str(user_id) if user_id else "", int(now_s) + FLOW_LIFETIME_S)


@dataclass(frozen=True)
class Claims:
    subject: str
    email: str
    email_verified: bool


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def flow_key(secret: bytes) -> bytes:
    """The cookie's HMAC key, derived from the install's secret so that it signs nothing else."""
    return hmac.new(secret, b"acs sign-in provider flow", hashlib.sha256).digest()


def seal(flow: Flow, key: bytes) -> str:
    body = _b64(json.dumps(asdict(flow), separators=(",", ":")).encode())
    return f"{body}.{_b64(hmac.new(key, body.encode(), hashlib.sha256).digest())}"


def unseal(value: str | None, key: bytes, now_s: float) -> Flow | None:
    """The flow of a cookie that this install signed and that has not expired; else None."""
    if not value or "." not in value:
        return None
    body, signature = value.rsplit(".", 1)
    expected = _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())
    if not hmac.compare_digest(signature, expected):
        return None
    try:
        flow = Flow(**json.loads(_unb64(body)))
    except (ValueError, TypeError):
        return None
    return flow if flow.expires > now_s else None


def _client(provider: Provider, redirect_uri: str, transport: Any) -> Any:
    """Authlib's OAuth 2 client, which is an httpx2.AsyncClient too (`transport`: a test's stand-in for the
    provider; None in use) (typed Any: authlib builds the class from
    mixins that pyright cannot follow, so it would see neither `get` nor `async with`)."""
    return AsyncOAuth2Client(client_id=provider.client_id, client_secret=provider.client_secret,
                             scope=provider.scope, redirect_uri=redirect_uri, code_challenge_method="S256",
                             timeout=TIMEOUT_S, transport=transport)


async def _discovery(provider: Provider, http: Any) -> dict[str, Any]:
    """The issuer's discovery document, kept an hour (its keys are read anew at each sign-in)."""
    kept = _discovered.get(provider.issuer)
    if kept is not None and time.monotonic() - kept[0] < DISCOVERY_KEPT_S:
        return kept[1]
    try:
        # Authlib's client sends its token with every request unless told that there is none yet.
        answer = await http.request("GET", f"{provider.issuer}/.well-known/openid-configuration",
                                    withhold_token=True)
        answer.raise_for_status()
        document = answer.json()
    except Exception as failure:  # noqa: BLE001 - unreachable, an error page, or no JSON
        raise ProviderRefused("unavailable", f"discovery of {provider.issuer}: {failure}") from failure
    if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != provider.issuer:
        raise ProviderRefused("unavailable", f"{provider.issuer}'s discovery names another issuer")
    _discovered[provider.issuer] = (time.monotonic(), document)
    return document


async def authorization_url(provider: Provider, redirect_uri: str, flow: Flow,
                            transport: Any = None) -> str:
    """Where the browser goes to sign in at the provider."""
    async with _client(provider, redirect_uri, transport) as client:
        if provider.kind == "github":
            # GitHub takes PKCE too; it has no nonce, as it issues no ID token.
            url, _ = client.create_authorization_url(GITHUB_AUTHORIZE, state=flow.state, code_verifier=flow.verifier)
            return url
        endpoint = (await _discovery(provider, client)).get("authorization_endpoint")
        if not isinstance(endpoint, str):
            raise ProviderRefused("unavailable", f"{provider.issuer} names no authorization_endpoint")
        url, _ = client.create_authorization_url(endpoint, state=flow.state, nonce=flow.nonce,
                                                 code_verifier=flow.verifier)
        return url


async def claims_of(provider: Provider, redirect_uri: str, flow: Flow, code: str,
                    transport: Any = None) -> Claims:
    """Who signed in at the provider: the code exchanged (with the PKCE verifier) and the answer read."""
    async with _client(provider, redirect_uri, transport) as client:
        try:
            if provider.kind == "github":
                await client.fetch_token(GITHUB_TOKEN, code=code, code_verifier=flow.verifier)
                return await _github_claims(client)
            document = await _discovery(provider, client)
            token = await client.fetch_token(document["token_endpoint"], code=code, code_verifier=flow.verifier)
            claims = await _id_token_claims(provider, document, token, flow.nonce, client)
        except ProviderRefused:
            raise
        except Exception as failure:  # noqa: BLE001 - authlib's and httpx's many errors: the provider said no
            raise ProviderRefused("failed", f"{provider.id}: {failure!r}") from failure
    return claims


def _verified(value: object) -> bool:
    # Some issuers write the boolean as a string.
    return value is True or (isinstance(value, str) and value.lower() == "true")


async def _id_token_claims(provider: Provider, document: dict[str, Any], token: dict[str, Any], nonce: str,
                           client: Any) -> Claims:
    id_token = token.get("id_token")
    if not isinstance(id_token, str):
        raise ProviderRefused("failed", f"{provider.id} sent no ID token")
    keys = (await client.request("GET", document["jwks_uri"], withhold_token=True)).raise_for_status().json()
    claims = jwt.decode(id_token, KeySet.import_key_set(keys)).claims
    check_id_token(claims, provider, nonce, time.time())
    if "email" not in claims and isinstance(document.get("userinfo_endpoint"), str):
        # An issuer may leave the email out of the ID token: OpenID Connect's UserInfo has it.
        info = (await client.get(document["userinfo_endpoint"])).raise_for_status().json()
        if str(info.get("sub")) != str(claims["sub"]):
            raise ProviderRefused("failed", f"{provider.id}'s UserInfo names another subject")
        claims = {**claims, **{name: info[name] for name in ("email", "email_verified") if name in info}}
    return Claims(str(claims["sub"]), str(claims.get("email") or "").strip().lower(),
                  _verified(claims.get("email_verified")))


def check_id_token(claims: dict[str, Any], provider: Provider, nonce: str, now_s: float) -> None:
    """An ID token for this App, from this issuer, alive, and answering this flow's nonce (OpenID Connect
    Core 3.1.3.7); its signature is checked before."""
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    problems = [
        str(claims.get("iss", "")).rstrip("/") != provider.issuer and "iss",
        provider.client_id not in audiences and "aud",
        (not isinstance(claims.get("exp"), (int, float)) or claims["exp"] + LEEWAY_S < now_s) and "exp",
        not hmac.compare_digest(str(claims.get("nonce", "")), nonce) and "nonce",
        not claims.get("sub") and "sub",
    ]
    wrong = [problem for problem in problems if problem]
    if wrong:
        raise ProviderRefused("failed", f"{provider.id}'s ID token has a wrong {', '.join(map(str, wrong))}")


async def _github_claims(client: Any) -> Claims:
    """GitHub's account id and its primary email, verified or not (provider_presets says why GitHub's API)."""
    headers = {"Accept": "application/vnd.github+json"}
    account = (await client.get(f"{GITHUB_API}/user", headers=headers)).raise_for_status().json()
    emails = (await client.get(f"{GITHUB_API}/user/emails", headers=headers)).raise_for_status().json()
    return github_claims(account, emails)


def github_claims(account: dict[str, Any], emails: list[dict[str, Any]]) -> Claims:
    """The account's primary email, or a verified one when the primary is not."""
    primary = next((entry for entry in emails if entry.get("primary")), None)
    chosen = primary if primary is not None and primary.get("verified") else next(
        (entry for entry in emails if entry.get("verified")), primary)
    email = str((chosen or {}).get("email") or "").strip().lower()
    return Claims(str(account["id"]), email, bool(chosen and chosen.get("verified") is True))
