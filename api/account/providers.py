"""Sign-in providers (spec: Get access, "Sign in" and "Link or unlink a provider"): the buttons the App
offers, the two legs of a provider's sign-in or link, and Unlink. HTTP in and out; the rules are
domain/account/providers.py, the protocol domain/account/provider_flow.py.

The two legs are browser navigations, not the App's API calls: `start` sends the browser to the provider
with a signed, ten-minute cookie that holds the flow's state, nonce and PKCE verifier; `callback` checks
it, ends it, and sends the browser to an App page: the next page with a new session, Profile after a link,
or the page the flow began on with `?problem=<code>` (and `wait`), whose words the page shows.
"""
from __future__ import annotations

import time
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import RedirectResponse

from api.account import cookies
from api.account.session import AccountDep
from api.auth import services_of
from api.client_address import client_address
from domain import errors
from domain.account import provider_flow, providers, sessions
from domain.account.provider_flow import Flow, ProviderRefused
from domain.account.provider_presets import Provider, provider_of

router = APIRouter(prefix="/providers")
FLOW_COOKIE = "acs_provider_flow"
INTENTS = {"sign-in": "/sign-in", "link": "/profile"}  # each intent's page, where its refusals show


def _provider(request: Request, provider_id: str) -> Provider:
    provider = provider_of(services_of(request).settings, provider_id)
    if provider is None:
        raise errors.NotFound(f"The App offers no sign-in provider {provider_id!r}.")
    return provider


def _base(request: Request) -> str:
    """The App's address: ACS_PUBLIC_BASE_URL, which the provider's registration names too; in development
    without it, the request's own (under the App's prefix)."""
    configured = (services_of(request).settings.public_base_url or "").strip()
    return (configured or str(request.base_url)).rstrip("/")


def _redirect_uri(request: Request, provider: Provider) -> str:
    return f"{_base(request)}/account/providers/{provider.id}/callback"


def _safe_next(value: str | None) -> str:
    """A page of the App to open after sign-in: a path here, never another site (`//host`, `/\\host`)."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return ""
    return value


def _to_page(request: Request, page: str, **query: str | int) -> RedirectResponse:
    shown = {name: str(value) for name, value in query.items() if value not in ("", None)}
    address = f"{_base(request)}{page}" + (f"?{urlencode(shown)}" if shown else "")
    answer = RedirectResponse(address, status_code=303)
    answer.delete_cookie(FLOW_COOKIE, path="/", httponly=True, samesite="lax", secure=cookies.is_secure(request))
    return answer


def _refused(request: Request, intent: str, provider: Provider, refusal: ProviderRefused) -> RedirectResponse:
    return _to_page(request, INTENTS.get(intent, "/sign-in"), provider=provider.id, problem=refusal.code,
                    wait=refusal.wait_s or "")


def _flow_key(request: Request) -> bytes:
    return provider_flow.flow_key(services_of(request).settings.harvest_link_key)


@router.get("")
async def offered(request: Request) -> dict:
    """The providers whose buttons the App shows (none: no button, and no Sign-in methods on Profile)."""
    return providers.offered_document(services_of(request).settings)


@router.get("/{provider_id}/start")
async def start(provider_id: str, request: Request, intent: str = "sign-in",
                next_page: str = Query("", alias="next")) -> Response:
    provider = _provider(request, provider_id)
    if intent not in INTENTS:
        raise errors.InvalidRequest("intent is sign-in or link.", "intent")
    user_id = None
    if intent == "link":
        try:
            account = await sessions.live_session(services_of(request), request.cookies.get(cookies.SESSION_COOKIE))
        except errors.SessionEnded:
            return _to_page(request, "/sign-in", ended=1, next="/profile")
        user_id = account.user_id
    flow = Flow.new(provider.id, intent, _safe_next(next_page), user_id, time.time())
    try:
        address = await provider_flow.authorization_url(provider, _redirect_uri(request, provider), flow)
    except ProviderRefused as refusal:
        return _refused(request, intent, provider, refusal)
    answer = RedirectResponse(address, status_code=303)
    # SameSite=Lax: the provider's redirect back is a top-level GET from its site, which Lax lets through.
    answer.set_cookie(FLOW_COOKIE, provider_flow.seal(flow, _flow_key(request)), max_age=provider_flow.FLOW_LIFETIME_S,
                      path="/", httponly=True, samesite="lax", secure=cookies.is_secure(request))
    return answer


@router.get("/{provider_id}/callback")
async def callback(provider_id: str, request: Request, code: str = "", state: str = "") -> Response:
    provider = _provider(request, provider_id)
    services = services_of(request)
    flow = provider_flow.unseal(request.cookies.get(FLOW_COOKIE), _flow_key(request), time.time())
    intent = flow.intent if flow is not None else "sign-in"
    try:
        if flow is None or flow.provider != provider.id or not state or state != flow.state:
            raise ProviderRefused("expired")
        if not code:  # the person said no at the provider, or it failed there (?error=...)
            raise ProviderRefused("failed")
        claims = await provider_flow.claims_of(provider, _redirect_uri(request, provider), flow, code)
        if flow.intent == "link":
            try:
                account = await sessions.live_session(services, request.cookies.get(cookies.SESSION_COOKIE))
            except errors.SessionEnded:
                return _to_page(request, "/sign-in", ended=1, next="/profile")
            if str(account.user_id) != flow.user_id:
                raise ProviderRefused("expired")
            await providers.link_provider(services, provider, claims, account.user_id)
            return _to_page(request, "/profile")
        signed = await providers.sign_in_with_provider(services, provider, claims, client_address(request))
    except ProviderRefused as refusal:
        return _refused(request, intent, provider, refusal)
    answer = _to_page(request, flow.next or signed.document["next"])
    cookies.set_session_cookie(request, answer, signed.token, signed.expires_at, signed.now)
    cookies.set_csrf_cookie(request, answer)
    return answer


@router.post("/{provider_id}/unlink")
async def unlink(provider_id: str, request: Request, account: AccountDep) -> dict:
    """CSRF: the /account routers' own check (api/app.py)."""
    return {"providers": await providers.unlink_provider(services_of(request), account, provider_id)}
