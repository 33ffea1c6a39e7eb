"""The try limits of the App's access routes (issue 33): which address they count, and that they count
each account too.

- The address is the peer's, as uvicorn hands it over under Ray Serve (cluster/serve.env tells uvicorn
  to trust no X-Forwarded-For); only a proxy that ACS_TRUSTED_PROXIES names may forward the client's.
- 5 tries a minute from one address (the spec's Get access and Limits), and 5 a minute against one
  account, whatever the addresses, with the same messages and Retry-After.
- Applications have the same limit as sign-in.
"""
from __future__ import annotations

from typing import Any

import httpx
import pytest
import uvicorn

from domain.settings import Settings
from domain.traffic.limits import BucketPolicy
from tests.account_fixtures import PASSWORD, browser_client, make_user, random_address
from tests.spec import assert_error
from tests.unit.test_account_access import FORM, Clock, error_of, the_tests_own, unique_email

SIGN_IN_WAIT = "Too many tries to sign in. Wait {n} seconds."
WAIT = "Too many tries. Wait {n} seconds."
PROXY = "192.0.2.10"  # a load balancer in front of the API, in ACS_TRUSTED_PROXIES below
WRONG = "not the password"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def composed(request: pytest.FixtureRequest) -> dict[str, Any]:
    return the_tests_own(request)


async def as_uvicorn_serves(stack: Any, peer: str) -> httpx.AsyncClient:
    """A browser whose requests reach the App through uvicorn's middleware as Ray Serve's proxy and
    direct ingress build it (ray/serve/_private/http_util.py: uvicorn.Config with its defaults), from
    `peer`. uvicorn's proxy headers come from the process's environment, as on a Ray node."""
    config = uvicorn.Config(lambda: stack.app, factory=True, lifespan="off", log_config=None)
    config.load()
    transport = httpx.ASGITransport(app=config.loaded_app, client=(peer, 50000))
    browser = httpx.AsyncClient(transport=transport, base_url="http://api.test", timeout=60)
    assert (await browser.get("/account/csrf")).status_code == 204
    browser.headers["X-CSRF-Token"] = browser.cookies["acs_csrf"]
    return browser


async def sign_in(browser: httpx.AsyncClient, email: str, password: str = WRONG, **headers: str) -> httpx.Response:
    return await browser.post("/account/sign-in", json={"email": email, "password": password},
                              headers={"X-CSRF-Token": browser.cookies["acs_csrf"], **headers})


def refused(answer: httpx.Response, message: str, wait_s: int) -> None:
    assert error_of(answer, 429, "too_many_tries")["message"] == message.format(n=wait_s)
    assert answer.headers["retry-after"] == str(wait_s)


# -- which address counts ----------------------------------------------------------------------------------

async def test_forged_forwarded_addresses_do_not_escape_the_limit(fake_stack, clock):
    """7 wrong sign-ins with 7 made-up X-Forwarded-For headers, from a local peer that uvicorn trusted by
    default (127.0.0.1 and ::1), at 7 different accounts: the 6th and 7th are refused."""
    browser = await as_uvicorn_serves(fake_stack, "::1")
    answers = [await sign_in(browser, unique_email(), **{"X-Forwarded-For": random_address()}) for _ in range(7)]
    assert [answer.status_code for answer in answers] == [401] * 5 + [429] * 2
    refused(answers[5], SIGN_IN_WAIT, 60)


@pytest.mark.settings(trusted_proxies=f"{PROXY}/31, 2001:db8::/32")
async def test_a_trusted_proxys_forwarded_address_is_counted(fake_stack, clock):
    through_proxy = await browser_client(fake_stack, PROXY)
    client = random_address()
    for i in range(5):
        # What the client wrote itself (left) changes; the address that the proxy appended does not.
        forwarded = {"X-Forwarded-For": f"203.0.113.{i}, {client}"}
        assert (await sign_in(through_proxy, unique_email(), **forwarded)).status_code == 401
    refused(await sign_in(through_proxy, unique_email(), **{"X-Forwarded-For": f"203.0.113.9, {client}"}),
            SIGN_IN_WAIT, 60)
    # Other clients behind the same proxy are other addresses: the proxy's own is not what counts.
    assert (await sign_in(through_proxy, unique_email(), **{"X-Forwarded-For": random_address()})).status_code == 401
    # A second trusted hop (the proxy's own, 192.0.2.11) is skipped to reach the client.
    two_hops = {"X-Forwarded-For": f"{client}, 192.0.2.11"}
    refused(await sign_in(through_proxy, unique_email(), **two_hops), SIGN_IN_WAIT, 60)


async def test_a_peer_that_is_not_a_trusted_proxy_cannot_forward(fake_stack, clock):
    browser = await browser_client(fake_stack)  # ACS_TRUSTED_PROXIES is empty by default
    for _ in range(5):
        assert (await sign_in(browser, unique_email(), **{"X-Forwarded-For": random_address()})).status_code == 401
    refused(await sign_in(browser, unique_email(), **{"X-Forwarded-For": random_address()}), SIGN_IN_WAIT, 60)


@pytest.mark.traffic(address=BucketPolicy(2, 0.5))
async def test_wrong_api_keys_count_the_same_address(fake_stack):
    """The /v1 limit of wrong keys per address (here 2) takes its address from the same function."""
    browser = await as_uvicorn_serves(fake_stack, "::1")
    answers = [await browser.get("/v1/models", headers={"Authorization": "Bearer sk-acs-wrong",
                                                          "X-Forwarded-For": random_address()}) for _ in range(3)]
    assert [answer.status_code for answer in answers] == [401, 401, 429]
    assert_error(answers[2], 429, "rate_limited", type="rate_limit_error")


@pytest.mark.settings(trusted_proxies=PROXY)
@pytest.mark.traffic(address=BucketPolicy(2, 0.5))
async def test_wrong_api_keys_behind_a_trusted_proxy_count_each_client(fake_stack):
    through_proxy = await browser_client(fake_stack, PROXY)
    clients = [random_address(), random_address()]
    answers = [await through_proxy.get("/v1/models", headers={"Authorization": "Bearer sk-acs-wrong",
                                                              "X-Forwarded-For": client}) for client in clients * 2]
    assert [answer.status_code for answer in answers] == [401] * 4  # two each: the load balancer is no one
    again = await through_proxy.get("/v1/models", headers={"Authorization": "Bearer sk-acs-wrong",
                                                           "X-Forwarded-For": clients[0]})
    assert_error(again, 429, "rate_limited", type="rate_limit_error")


def test_a_trusted_proxy_that_is_no_address_is_refused_at_start():
    with pytest.raises(ValueError, match=r"ACS_TRUSTED_PROXIES names 'lb\.internal', which is neither an address "
                                         r"nor a CIDR range"):
        Settings(trusted_proxies="10.0.0.0/8, lb.internal")
    assert Settings(trusted_proxies=" 10.0.0.0/8 ,192.0.2.7,2001:db8::/32 ").trusted_proxies


# -- each account counts too -------------------------------------------------------------------------------

async def test_tries_on_one_account_from_many_addresses_are_refused(fake_stack, clock):
    victim = await make_user(fake_stack, unique_email("victim"))
    for _ in range(5):
        assert (await sign_in(await browser_client(fake_stack), victim.email)).status_code == 401
        clock.advance(seconds=2)
    # The 6th, from yet another address, even with the right password: the account waits out its minute.
    late = await browser_client(fake_stack)
    refused(await sign_in(late, victim.email.upper(), PASSWORD), SIGN_IN_WAIT, 50)
    clock.advance(seconds=50)
    assert (await sign_in(late, victim.email, PASSWORD)).status_code == 200


async def test_someone_elses_tries_lock_no_other_account_beyond_the_address_limit(fake_stack, clock):
    victim, own = await make_user(fake_stack, unique_email("victim")), await make_user(fake_stack, unique_email())
    shared = random_address()  # one office behind one address: an attacker and a User
    attacker = await browser_client(fake_stack, shared)
    assert (await sign_in(attacker, victim.email)).status_code == 401
    for _ in range(4):
        assert (await sign_in(await browser_client(fake_stack), victim.email)).status_code == 401
    refused(await sign_in(attacker, victim.email), SIGN_IN_WAIT, 60)  # the victim's account waits
    user = await browser_client(fake_stack, shared)
    assert (await sign_in(user, own.email, PASSWORD)).status_code == 200  # the address has tries left
    for _ in range(3):
        assert (await sign_in(user, unique_email())).status_code == 401
    # The address has had its 5 tries (a refused try counts for nothing): the spec's limit per address.
    refused(await sign_in(user, own.email, PASSWORD), SIGN_IN_WAIT, 60)


async def test_links_to_one_account_are_limited_from_any_address(fake_stack, clock):
    email = unique_email()
    for _ in range(5):
        browser = await browser_client(fake_stack)
        answer = await browser.post("/account/password-links", json={"email": email},
                                    headers={"X-CSRF-Token": browser.cookies["acs_csrf"]})
        assert answer.json() == {"message": "Check your email."}
    browser = await browser_client(fake_stack)
    refused(await browser.post("/account/password-links", json={"email": email.lower()},
                               headers={"X-CSRF-Token": browser.cookies["acs_csrf"]}), WAIT, 60)


# -- Applications ------------------------------------------------------------------------------------------

async def test_applications_have_the_sign_in_limit(fake_stack, clock):
    browser = await browser_client(fake_stack)
    headers = {"X-CSRF-Token": browser.cookies["acs_csrf"]}
    taken = unique_email()
    for email, status in ((taken, 201), (taken, 409), (unique_email(), 201), (unique_email(), 201),
                          (unique_email(), 201)):
        answer = await browser.post("/account/applications", json={**FORM, "email": email}, headers=headers)
        assert answer.status_code == status, answer.text
    refused(await browser.post("/account/applications", json={**FORM, "email": unique_email()}, headers=headers),
            WAIT, 60)
    clock.advance(minutes=1)
    again = await browser.post("/account/applications", json={**FORM, "email": taken}, headers=headers)
    assert error_of(again, 409, "application_exists")["message"] == "An application from this email already exists."


async def test_applications_from_many_addresses_for_one_email_are_limited(fake_stack, clock):
    email = unique_email()
    for _ in range(5):
        browser = await browser_client(fake_stack)
        answer = await browser.post("/account/applications", json={**FORM, "email": email},
                                    headers={"X-CSRF-Token": browser.cookies["acs_csrf"]})
        assert answer.status_code in (201, 409), answer.text
    browser = await browser_client(fake_stack)
    refused(await browser.post("/account/applications", json={**FORM, "email": email},
                               headers={"X-CSRF-Token": browser.cookies["acs_csrf"]}), WAIT, 60)
