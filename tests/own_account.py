"""A User signed in to the App on the fake stack (through the real sign-in, tests/account_fixtures.py),
with a first API key made on API Keys: for the tests of the keys, usage and token-request routes."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from tests.account_fixtures import Browser, signed_in


@dataclass
class OwnAccount:
    """`browser` sends the session and the CSRF token; `key` is a whole API key of the same User."""

    stack: Any
    browser: Browser
    key: str

    @property
    def user_id(self) -> uuid.UUID:
        return self.browser.user_id

    @property
    def email(self) -> str:
        return self.browser.email

    async def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return await self.browser.request(method, path, **({} if body is None else {"json": body}))

    async def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        response = await self.call(method, path, body)
        assert response.status_code == status, response.text
        return response.json()

    async def completion(self, key: str | None = None, **fields: Any) -> httpx.Response:
        """A Completion with a key of this User, through the API (the stack's own client, no cookie)."""
        body = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2, **fields}
        return await self.stack.http.post("/v1/completions", json=body,
                                          headers={"Authorization": f"Bearer {key or self.key}"})


async def sign_in(stack: Any, key_name: str | None = "laptop") -> OwnAccount:
    """A new User, signed in, with a first key named `key_name` (none when None)."""
    account = OwnAccount(stack, await signed_in(stack), "")
    if key_name is not None:
        account.key = (await account.ok("POST", "/account/keys", {"name": key_name}, status=201))["key"]
    return account
