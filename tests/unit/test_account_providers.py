"""Sign-in providers (spec: Get access, "Sign in" and "Link or unlink a provider"), each rule of the guide
through the App's routes against a real OpenID Connect provider on loopback: oidc-provider-mock, a Flask
provider that signs real ID tokens (RS256) and publishes its keys, run in a thread.

The test's browser follows the redirects itself: the App's start sends it to the provider's authorization
page, the test posts the provider's form (the subject to sign in as), and the provider sends it back to
the App's callback with a code.
"""
from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlmodel import select

from domain.account import provider_flow
from domain.account.provider_flow import Claims, Flow, ProviderRefused, check_id_token, github_claims
from domain.account.provider_presets import LAST_WAY, MESSAGES, SESSION_TOO_OLD, Provider, offered
from domain.operations.users import set_standing
from domain.settings import Settings
from ledger.accounts.identities import SignInIdentity
from ledger.accounts.tables import Standing, User
from tests.account_fixtures import browser_client, make_user, signed_in
from tests.unit.test_account_access import Clock, clock, composed  # noqa: F401 - the stack's clock

CLIENT = {"oidc_client_id": "acs-tests", "oidc_client_secret": "not-a-secret", "oidc_name": "Loopback ID"}


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    """A real OpenID Connect provider on a free loopback port, for this module's tests."""
    from oidc_provider_mock import run_server_in_thread

    with run_server_in_thread(require_nonce=True) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture
def provider_stack(issuer: str, request: pytest.FixtureRequest) -> Any:
    request.applymarker(pytest.mark.settings(oidc_issuer=issuer, **CLIENT))
    return request.getfixturevalue("fake_stack")


def person(issuer: str, email: str, verified: bool = True) -> str:
    """A person at the provider with this email: their subject."""
    subject = f"sub-{uuid.uuid4().hex[:12]}"
    answer = httpx.put(f"{issuer}/users/{subject}", json={"email": email, "email_verified": verified})
    assert answer.status_code == 204, answer.text
    return subject


async def through_provider(http: httpx.AsyncClient, subject: str, intent: str = "sign-in",
                           next_page: str = "") -> httpx.Response:
    """Start at the App, sign in at the provider as `subject`, and come back: the callback's answer."""
    query = {"intent": intent, **({"next": next_page} if next_page else {})}
    start = await http.get("/account/providers/oidc/start", params=query)
    assert start.status_code == 303, start.text
    at_provider = httpx.post(start.headers["location"], data={"sub": subject})
    assert at_provider.status_code == 302, at_provider.text
    back = urlsplit(at_provider.headers["location"])
    assert back.path == "/account/providers/oidc/callback"
    return await http.get(f"{back.path}?{back.query}")


def problem_of(answer: httpx.Response) -> tuple[str, dict[str, list[str]]]:
    assert answer.status_code == 303, answer.text
    place = urlsplit(answer.headers["location"])
    return place.path, parse_qs(place.query)


async def identities_of(stack: Any, user_id: uuid.UUID) -> list[SignInIdentity]:
    async with stack.services.sessions() as session:
        return list(await session.exec(select(SignInIdentity).where(SignInIdentity.user_id == user_id)))


async def users_with(stack: Any, email: str) -> list[User]:
    async with stack.services.sessions() as session:
        return list(await session.exec(select(User).where(User.email == email)))


# -- what the App offers --------------------------------------------------------------------------------

def test_a_provider_is_offered_only_with_its_client_id_and_secret():
    assert offered(Settings(profile="test")) == []
    settings = Settings(profile="test", github_client_id="g", github_client_secret="s", google_client_id="only-id",
                        hugging_face_client_id="h", hugging_face_client_secret="s", oidc_issuer="https://id.example.org/",
                        oidc_client_id="c", oidc_client_secret="s", oidc_name="Example ID")
    found = offered(settings)
    assert [(provider.id, provider.name) for provider in found] == [
        ("github", "GitHub"), ("hugging-face", "Hugging Face"), ("oidc", "Example ID")]
    assert found[1].issuer == "https://huggingface.co" and found[2].issuer == "https://id.example.org"
    google = offered(Settings(profile="test", google_client_id="c", google_client_secret="s"))
    assert google[0].issuer == "https://accounts.google.com" and google[0].kind == "oidc"


async def test_without_a_provider_the_app_offers_none(fake_stack):
    answer = await (await browser_client(fake_stack)).get("/account/providers")
    assert answer.json()["providers"] == []
    browser = await signed_in(fake_stack)
    assert (await browser.get("/account/me")).json()["providers"] == []
    assert (await browser.get("/account/providers/oidc/start")).status_code == 404


async def test_the_offered_providers_and_the_words_of_their_refusals(provider_stack):
    answer = await (await browser_client(provider_stack)).get("/account/providers")
    assert answer.json() == {"providers": [{"id": "oidc", "name": "Loopback ID"}], "messages": MESSAGES}
    assert "Verify it at the provider, then try again." in MESSAGES["email_not_verified"]


# -- signing in ---------------------------------------------------------------------------------------------

async def test_the_first_sign_in_links_the_provider_and_starts_a_session(provider_stack, issuer):
    user = await make_user(provider_stack, email=f"ada-{uuid.uuid4().hex[:6]}@example.org")
    subject = person(issuer, user.email or "")
    http = await browser_client(provider_stack)
    back = await through_provider(http, subject)
    assert problem_of(back) == ("/api-keys", {})  # no key yet, as after a password's sign-in
    cookies = back.headers.get_list("set-cookie")
    assert any(cookie.startswith("acs_session=") and "HttpOnly" in cookie for cookie in cookies)
    assert any(cookie.startswith("acs_csrf=") for cookie in cookies)
    assert any(cookie.startswith('acs_provider_flow=""') or "acs_provider_flow=;" in cookie for cookie in cookies)
    me = (await http.get("/account/me")).json()
    assert me["email"] == user.email and [p["id"] for p in me["providers"]] == ["oidc"]
    assert me["providers"][0]["name"] == "Loopback ID" and me["providers"][0]["email"] == user.email
    rows = await identities_of(provider_stack, user.id)
    assert [(row.provider, row.subject, row.email) for row in rows] == [("oidc", subject, user.email)]
    # Who, never how: the table has no column that could hold a provider's token.
    assert set(SignInIdentity.model_fields) == {"id", "user_id", "provider", "subject", "email", "linked_at"}
    # The next sign-in finds the link, and opens the page that the App asked for.
    again = await through_provider(await browser_client(provider_stack), subject, next_page="/usage")
    assert problem_of(again) == ("/usage", {})
    assert len(await identities_of(provider_stack, user.id)) == 1


@pytest.mark.postgres
async def test_a_link_and_an_unlink_on_postgresql(provider_stack, issuer):
    """The link's table and its unique constraints on the cluster's database too."""
    browser = await signed_in(provider_stack)
    subject = person(issuer, browser.email)
    assert problem_of(await through_provider(browser.http, subject, intent="link")) == ("/profile", {})
    other = await make_user(provider_stack)
    httpx.put(f"{issuer}/users/{subject}", json={"email": other.email, "email_verified": True})
    back = await through_provider(await browser_client(provider_stack), subject)
    assert problem_of(back)[1]["problem"] == ["linked_elsewhere"]
    assert (await browser.post("/account/providers/oidc/unlink")).json() == {"providers": []}


@pytest.mark.postgres
async def test_two_first_sign_ins_at_once_make_one_link(provider_stack, issuer):
    """On PostgreSQL both may find no link and both insert: the second meets the first's row and is told
    to try again, never a 500, and that try signs in."""
    import asyncio

    from domain.account.providers import sign_in_with_provider
    from domain.account.provider_presets import provider_of

    user = await make_user(provider_stack)
    provider = provider_of(provider_stack.services.settings, "oidc")
    assert provider is not None
    claims = Claims("sub-at-once", user.email or "", True)
    results = await asyncio.gather(*(sign_in_with_provider(provider_stack.services, provider, claims, f"10.7.7.{n}")
                                     for n in range(2)), return_exceptions=True)
    refused = [result for result in results if isinstance(result, ProviderRefused)]
    assert all(result.code == "failed" for result in refused), results
    assert len(refused) < 2 and not [result for result in results if isinstance(result, Exception)
                                     and not isinstance(result, ProviderRefused)]
    assert len(await identities_of(provider_stack, user.id)) == 1
    await sign_in_with_provider(provider_stack.services, provider, claims, "10.7.7.9")


async def test_an_unverified_email_is_refused(provider_stack, issuer):
    user = await make_user(provider_stack)
    http = await browser_client(provider_stack)
    back = await through_provider(http, person(issuer, user.email or "", verified=False))
    assert problem_of(back) == ("/sign-in", {"provider": ["oidc"], "problem": ["email_not_verified"]})
    assert not any(cookie.startswith("acs_session=") for cookie in back.headers.get_list("set-cookie"))
    assert await identities_of(provider_stack, user.id) == []
    assert (await http.get("/account/me")).status_code == 401


async def test_a_provider_never_makes_a_user(provider_stack, issuer):
    email = f"nobody-{uuid.uuid4().hex[:6]}@example.org"
    back = await through_provider(await browser_client(provider_stack), person(issuer, email))
    assert problem_of(back) == ("/sign-in", {"provider": ["oidc"], "problem": ["no_user"]})
    assert await users_with(provider_stack, email) == []
    assert "apply for access first" in MESSAGES["no_user"]


async def test_a_suspended_user_is_refused_and_nothing_is_linked(provider_stack, issuer):
    user = await make_user(provider_stack)
    async with provider_stack.services.ledger.write_sessions() as session:
        await set_standing(session, user.id, Standing.suspended)
    back = await through_provider(await browser_client(provider_stack), person(issuer, user.email or ""))
    assert problem_of(back)[1]["problem"] == ["account_suspended"]
    assert await identities_of(provider_stack, user.id) == []


async def test_a_provider_account_links_to_one_user_and_a_user_to_one_account_of_each(provider_stack, issuer):
    first, second = await make_user(provider_stack), await make_user(provider_stack)
    subject = person(issuer, first.email or "")
    assert problem_of(await through_provider(await browser_client(provider_stack), subject))[0] == "/api-keys"
    # The same account at the provider now gives the second User's email: it stays the first User's.
    httpx.put(f"{issuer}/users/{subject}", json={"email": second.email, "email_verified": True})
    back = await through_provider(await browser_client(provider_stack), subject)
    assert problem_of(back)[1]["problem"] == ["linked_elsewhere"]
    # Another account at the provider, with the first User's email: the first User has one linked.
    back = await through_provider(await browser_client(provider_stack), person(issuer, first.email or ""))
    assert problem_of(back)[1]["problem"] == ["other_account"]
    assert await identities_of(provider_stack, second.id) == []


async def test_a_callback_without_its_own_flow_is_refused(provider_stack, issuer):
    user = await make_user(provider_stack)
    subject = person(issuer, user.email or "")
    http = await browser_client(provider_stack)
    start = await http.get("/account/providers/oidc/start")
    at_provider = httpx.post(start.headers["location"], data={"sub": subject})
    back = urlsplit(at_provider.headers["location"])
    # Another browser (no flow cookie), and this browser with another state: both refused.
    stranger = await (await browser_client(provider_stack)).get(f"{back.path}?{back.query}")
    assert problem_of(stranger)[1]["problem"] == ["expired"]
    code = parse_qs(back.query)["code"][0]
    forged = await http.get(back.path, params={"code": code, "state": "not-the-state"})
    assert problem_of(forged)[1]["problem"] == ["expired"]
    denied = await http.get(back.path, params={"error": "access_denied", "state": parse_qs(back.query)["state"][0]})
    assert problem_of(denied)[1]["problem"] in (["failed"], ["expired"])
    assert await identities_of(provider_stack, user.id) == []


async def test_a_provider_sign_in_counts_against_the_five_tries_a_minute(provider_stack, issuer):
    user = await make_user(provider_stack)
    subject = person(issuer, user.email or "")
    http = await browser_client(provider_stack, address="10.9.9.9")
    for _ in range(5):
        assert problem_of(await through_provider(http, subject))[0] == "/api-keys"
    path, query = problem_of(await through_provider(http, subject))
    assert path == "/sign-in" and query["problem"] == ["too_many_tries"] and int(query["wait"][0]) > 0
    assert MESSAGES["too_many_tries"].startswith("Too many tries to sign in.")


# -- linking and unlinking ------------------------------------------------------------------------------

async def test_link_from_profile_then_unlink(provider_stack, issuer):
    browser = await signed_in(provider_stack)
    back = await through_provider(browser.http, person(issuer, browser.email), intent="link")
    assert problem_of(back) == ("/profile", {})
    assert [p["id"] for p in (await browser.get("/account/me")).json()["providers"]] == ["oidc"]
    # A password is another way to sign in: the provider may go.
    refused = await browser.http.post("/account/providers/oidc/unlink")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
    answer = await browser.post("/account/providers/oidc/unlink")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"providers": []}
    assert (await browser.post("/account/providers/oidc/unlink")).status_code == 404


async def test_link_needs_the_users_own_verified_email_and_a_session(provider_stack, issuer):
    browser = await signed_in(provider_stack)
    back = await through_provider(browser.http, person(issuer, "someone-else@example.org"), intent="link")
    assert problem_of(back) == ("/profile", {"provider": ["oidc"], "problem": ["email_mismatch"]})
    back = await through_provider(browser.http, person(issuer, browser.email, verified=False), intent="link")
    assert problem_of(back)[1]["problem"] == ["email_not_verified"]
    signed_out = await (await browser_client(provider_stack)).get("/account/providers/oidc/start",
                                                                  params={"intent": "link"})
    assert problem_of(signed_out) == ("/sign-in", {"ended": ["1"], "next": ["/profile"]})
    assert await identities_of(provider_stack, browser.user_id) == []


async def test_the_last_way_to_sign_in_cannot_be_unlinked(provider_stack, issuer):
    user = await make_user(provider_stack, password=None)  # no password yet: the provider is the one way
    http = await browser_client(provider_stack)
    assert problem_of(await through_provider(http, person(issuer, user.email or "")))[0] == "/api-keys"
    refused = await http.post("/account/providers/oidc/unlink", headers={"X-CSRF-Token": http.cookies["acs_csrf"]})
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "last_sign_in_method" and refused.json()["error"]["message"] == LAST_WAY
    assert len(await identities_of(provider_stack, user.id)) == 1


async def test_unlinking_needs_a_session_younger_than_a_day(provider_stack, issuer, clock: Clock):
    browser = await signed_in(provider_stack)
    await through_provider(browser.http, person(issuer, browser.email), intent="link")
    clock.advance(hours=23, minutes=59)
    clock.advance(minutes=1)
    refused = await browser.post("/account/providers/oidc/unlink")
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "session_too_old" and refused.json()["error"]["message"] == SESSION_TOO_OLD
    # A new sign-in, a new session: now it may.
    again = await signed_in_again(provider_stack, browser.email, browser.password)
    assert (await again.post("/account/providers/oidc/unlink", headers={"X-CSRF-Token": again.cookies["acs_csrf"]})
            ).status_code == 200


async def signed_in_again(stack: Any, email: str, password: str) -> httpx.AsyncClient:
    http = await browser_client(stack)
    answer = await http.post("/account/sign-in", json={"email": email, "password": password},
                             headers={"X-CSRF-Token": http.cookies["acs_csrf"]})
    assert answer.status_code == 200, answer.text
    return http


# -- the protocol's own checks --------------------------------------------------------------------------

PROVIDER = Provider("oidc", "Example", "client", "secret", "oidc", "https://id.example.org")


def test_an_id_token_must_be_for_this_app_from_this_issuer_alive_and_for_this_flow():
    good = {"iss": "https://id.example.org", "aud": ["client", "other"], "exp": 1_000, "nonce": "n", "sub": "s"}
    check_id_token(good, PROVIDER, "n", now_s=900)
    for wrong in ({"iss": "https://evil.example.org"}, {"aud": "someone-else"}, {"exp": 100}, {"nonce": "m"},
                  {"sub": ""}):
        with pytest.raises(ProviderRefused) as refused:
            check_id_token({**good, **wrong}, PROVIDER, "n", now_s=900)
        assert refused.value.code == "failed"


def test_the_flow_cookie_is_signed_and_short_lived():
    key = provider_flow.flow_key(b"secret")
    flow = Flow.new("oidc", "sign-in", "/usage", None, now_s=1_000)
    sealed = provider_flow.seal(flow, key)
    assert provider_flow.unseal(sealed, key, 1_001) == flow
    assert provider_flow.unseal(sealed, key, 1_000 + provider_flow.FLOW_LIFETIME_S) is None
    assert provider_flow.unseal(sealed, provider_flow.flow_key(b"other"), 1_001) is None
    body, signature = sealed.rsplit(".", 1)
    assert provider_flow.unseal(body[:-2] + "xx." + signature, key, 1_001) is None
    assert provider_flow.unseal(None, key, 1_001) is None


def test_github_gives_its_primary_email_when_verified_else_a_verified_one():
    account = {"id": 42, "login": "ada"}
    both = [{"email": "Ada@Example.org", "primary": True, "verified": True},
            {"email": "old@example.org", "primary": False, "verified": True}]
    assert github_claims(account, both) == Claims("42", "ada@example.org", True)
    unverified_primary = [{"email": "new@example.org", "primary": True, "verified": False},
                          {"email": "old@example.org", "primary": False, "verified": True}]
    assert github_claims(account, unverified_primary) == Claims("42", "old@example.org", True)
    assert github_claims(account, [{"email": "new@example.org", "primary": True, "verified": False}]) == Claims(
        "42", "new@example.org", False)


async def test_github_reads_the_verified_email_during_the_callback_and_keeps_no_token():
    """GitHub's leg against a stand-in of GitHub's three addresses (its token, /user, /user/emails)."""
    seen: list[str] = []

    import httpx2  # authlib's HTTP client, where it is installed (the openai SDK installs it)

    def github(request: Any) -> Any:
        seen.append(f"{request.method} {request.url.host}{request.url.path}")
        if request.url.path == "/login/oauth/access_token":
            form = parse_qs(request.content.decode())
            assert form["code"] == ["the-code"] and form["code_verifier"] == [flow.verifier]
            assert request.headers["accept"] == "application/json"  # GitHub answers a form without it
            return httpx2.Response(200, json={"access_token": "gho_x", "token_type": "bearer", "scope": "user:email"})
        assert request.headers["authorization"] == "Bearer gho_x"
        if request.url.path == "/user":
            return httpx2.Response(200, json={"id": 7, "login": "ada"})
        return httpx2.Response(200, json=[{"email": "ada@example.org", "primary": True, "verified": True}])

    provider = Provider("github", "GitHub", "client", "secret", "github", scope="user:email")
    flow = Flow.new("github", "sign-in", "", None, now_s=0)
    url = await provider_flow.authorization_url(provider, "https://acs.example.org/cb", flow)
    query = parse_qs(urlsplit(url).query)
    assert url.startswith("https://github.com/login/oauth/authorize?")
    assert query["state"] == [flow.state] and query["code_challenge_method"] == ["S256"]
    claims = await provider_flow.claims_of(provider, "https://acs.example.org/cb", flow, "the-code",
                                           transport=httpx2.MockTransport(github))
    assert claims == Claims("7", "ada@example.org", True)
    assert seen == ["POST github.com/login/oauth/access_token", "GET api.github.com/user",
                    "GET api.github.com/user/emails"]


def test_session_too_old_boundary_is_a_day():
    from domain.account.providers import UNLINK_WITHIN

    assert UNLINK_WITHIN == timedelta(days=1)
