"""A signed-in App session for tests of the /account routes, over a stack's real sign-in.

    browser = await signed_in(fake_stack)                  # a new User with an email and a password
    answer = await browser.get("/account/me")              # the session cookie goes along
    answer = await browser.post("/account/keys", json={"name": "laptop"})   # and the CSRF header
    browser.user_id, browser.email, browser.cookies, browser.csrf_headers()

`signed_in` makes the User directly in the ledger (with an argon2 hash of the password), then signs in
through POST /account/sign-in, so the cookies are the ones the App's browser gets.
"""
from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from ledger.accounts import passwords
from ledger.accounts.tables import Role, User

PASSWORD = "correct horse battery"


@dataclass
class Browser:
    """An httpx client over the stack's app with the App's cookies: the session's and the CSRF token's."""

    http: httpx.AsyncClient
    user_id: uuid.UUID
    email: str
    password: str
    sign_in: dict[str, Any]  # the answer of POST /account/sign-in

    @property
    def cookies(self) -> httpx.Cookies:
        return self.http.cookies

    @property
    def csrf(self) -> str:
        return self.http.cookies.get("acs_csrf") or ""

    def csrf_headers(self) -> dict[str, str]:
        return {"X-CSRF-Token": self.csrf}

    async def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.http.get(path, **kwargs)

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.csrf_headers(), **kwargs.pop("headers", {})}
        return await self.http.request(method, path, headers=headers, **kwargs)

    async def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("POST", path, **kwargs)

    async def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("DELETE", path, **kwargs)

    async def aclose(self) -> None:
        await self.http.aclose()


def random_address() -> str:
    return "10." + ".".join(str(random.randrange(1, 255)) for _ in range(3))


async def browser_client(stack: Any, address: str | None = None) -> httpx.AsyncClient:
    """A client of its own (its own cookie jar) over the stack's app, with the CSRF cookie that
    GET /account/csrf sets, as the App's JS gets it. Each comes from an address of its own (random
    unless given), so that the sign-in limit of 5 tries a minute per address counts one test's tries."""
    transport = httpx.ASGITransport(app=stack.app, client=(address or random_address(), 50000))
    client = httpx.AsyncClient(transport=transport, base_url="http://api.test", timeout=60)
    answer = await client.get("/account/csrf")
    assert answer.status_code == 204, answer.text
    return client


def new_user(now: datetime, email: str | None = None, password: str | None = PASSWORD, *,
             name: str | None = None, role: Role = Role.user) -> User:
    """The row of a User with an email and (unless None) a password, as an approval makes it."""
    email = email or f"user-{uuid.uuid4().hex[:8]}@example.org"
    return User(name=name or f"{email} {uuid.uuid4().hex[:4]}", email=email.lower(), role=role,
                password_hash=passwords.hash_password(password) if password else None,
                password_set_at=now if password else None)


async def make_user(stack: Any, email: str | None = None, password: str | None = PASSWORD, *,
                    name: str | None = None, role: Role = Role.user) -> User:
    """A User with an email and (unless None) a password, made in the ledger as an approval would."""
    user = new_user(stack.services.clock(), email, password, name=name, role=role)
    async with stack.services.ledger.write_sessions() as session:
        session.add(user)
        await session.commit()
    return user


async def signed_in(stack: Any, email: str | None = None, password: str = PASSWORD, *,
                    role: Role = Role.user, client: httpx.AsyncClient | None = None,
                    name: str | None = None) -> Browser:
    """A new User, signed in through POST /account/sign-in. Close the Browser when done (or leave it to
    the test's end: it holds no server resources)."""
    user = await make_user(stack, email, password, role=role, name=name)
    http = client or await browser_client(stack)
    answer = await http.post("/account/sign-in", json={"email": user.email, "password": password},
                             headers={"X-CSRF-Token": http.cookies.get("acs_csrf") or ""})
    assert answer.status_code == 200, answer.text
    return Browser(http, user.id, user.email or "", password, answer.json())
