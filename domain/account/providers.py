"""Signing in with a provider, linking one and unlinking it: the guide's rules (spec: Get access, "Sign in"
and "Link or unlink a provider").

- The provider must have verified the email, and it must be a User's: a provider never makes a User.
- The first sign-in with a provider links it to the User of that email; later ones find the link.
- A provider's account links to one User, and a User links one account of each provider.
- A sign-in counts against the same 5 tries a minute as a password's, and a suspended User is refused alike.
- Unlinking needs a session younger than a day, and never takes the User's last way to sign in: a password,
  or another linked provider that the App still offers.
- No token of the provider is kept (ledger/accounts/identities.py holds who, not how).

The protocol itself is provider_flow.py; the offered providers and the words are provider_presets.py.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlmodel.ext.asyncio.session import AsyncSession

from domain import errors
from domain.account.access import count
from domain.account.linked_providers import linked
from domain.account.provider_flow import Claims, ProviderRefused
from domain.account.provider_presets import LAST_WAY, MESSAGES, NOT_LINKED, SESSION_TOO_OLD, Provider, offered
from domain.account.sessions import AccountUser
from domain.account.sign_in import SignIn, me
from domain.services import Services
from domain.settings import Settings
from ledger.accounts import identities, sign_in
from ledger.accounts.access_tries import Family
from ledger.accounts.applications import user_by_email
from ledger.accounts.tables import Standing, User
from ledger.errors import TooManyTries

UNLINK_WITHIN = timedelta(days=1)


def offered_document(settings: Settings) -> dict:
    """GET /account/providers: the buttons the App shows, and the words of each refusal."""
    return {"providers": [{"id": provider.id, "name": provider.name} for provider in offered(settings)],
            "messages": MESSAGES}


def _usable(claims: Claims) -> None:
    if not claims.email or not claims.email_verified:
        raise ProviderRefused("email_not_verified")


async def _link_once(session: AsyncSession, user_id: uuid.UUID, provider: Provider, claims: Claims,
                     now: datetime) -> None:
    """Links the provider's account to the User, unless it is already: flushes, does not commit. Of two
    first sign-ins at once, the second meets the first's row in the unique constraints: it is told to try
    again, and that try finds the link."""
    try:
        await _link_if_new(session, user_id, provider, claims, now)
    except IntegrityError as conflict:
        raise ProviderRefused("failed", f"a link of {provider.id} was made at the same time") from conflict


async def _link_if_new(session: AsyncSession, user_id: uuid.UUID, provider: Provider, claims: Claims,
                       now: datetime) -> None:
    found = await identities.by_subject(session, provider.id, claims.subject)
    if found is not None:
        if found.user_id != user_id:
            raise ProviderRefused("linked_elsewhere")
        return
    linked_here = [row for row in await identities.of_user(session, user_id) if row.provider == provider.id]
    if any(row.subject == claims.subject for row in linked_here):
        return  # a sign-in at the same moment committed this very link between the two reads
    if linked_here:
        raise ProviderRefused("other_account")
    await identities.link(session, user_id, provider.id, claims.subject, claims.email, now)


async def sign_in_with_provider(services: Services, provider: Provider, claims: Claims, address: str) -> SignIn:
    """A new session for the User of the provider's verified email, as a password sign-in makes one; the
    first one links the provider."""
    _usable(claims)
    try:
        await count(services, Family.sign_in, address, claims.email)
    except TooManyTries as refused:
        raise ProviderRefused("too_many_tries", wait_s=refused.wait_s) from refused
    async with services.ledger.write_sessions() as session:
        user = await user_by_email(session, claims.email)
        if user is None:
            raise ProviderRefused("no_user")
        if user.standing == Standing.suspended:
            raise ProviderRefused("account_suspended")
        await _link_once(session, user.id, provider, claims, services.clock())
        signed = await sign_in.start_session(session, user, services.clock())  # commits the link with it
    user = signed.user
    found = await me(services, user.id, user.email or "", user.name, user.role.value)
    return SignIn(signed.token, signed.expires_at, services.clock(),
                  {"user": found, "next": "/playground" if found["has_key"] else "/api-keys"})


async def link_provider(services: Services, provider: Provider, claims: Claims, user_id: uuid.UUID) -> None:
    """Links the provider to the signed-in User: it must have verified the User's own email."""
    _usable(claims)
    async with services.ledger.write_sessions() as session:
        user = await session.get(User, user_id)
        if user is None or user.standing == Standing.suspended:
            raise ProviderRefused("account_suspended")
        if (user.email or "").lower() != claims.email:
            raise ProviderRefused("email_mismatch")
        await _link_once(session, user_id, provider, claims, services.clock())
        await session.commit()


async def unlink_provider(services: Services, account: AccountUser, provider_id: str) -> list[dict]:
    """Takes the provider off the User; the User's linked providers after."""
    now = services.clock()
    still = {provider.id for provider in offered(services.settings)}
    async with services.ledger.write_sessions() as session:
        rows = await identities.of_user(session, account.user_id)
        if not any(row.provider == provider_id for row in rows):
            name = next((provider.name for provider in offered(services.settings) if provider.id == provider_id),
                        provider_id)
            raise errors.NotFound(NOT_LINKED.format(provider=name))
        user = await session.get(User, account.user_id)
        others = [row for row in rows if row.provider != provider_id and row.provider in still]
        if user is None or (not user.password_hash and not others):
            raise errors.LastSignInMethod(LAST_WAY)
        started = await identities.session_started_at(session, account.session_id)
        if started is None or now - started >= UNLINK_WITHIN:
            raise errors.SessionTooOld(SESSION_TOO_OLD)
        await identities.unlink(session, account.user_id, provider_id)
        await session.commit()
    return await linked(services, account.user_id)
