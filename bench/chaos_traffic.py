"""The chaos soak's Users and traffic (bench/chaos.py): Users with API keys and Budgets near
their ends, one signed in to the App, and the mixed requests of issue 38, each recorded with its
status, its error object and, for a stream, how it ended (bench/chaos_plan.py).

The Users are made in the ledger as an approval makes them (a User row with an email and a
password's hash, ledger/accounts/passwords.py), their keys, allowances and Grants by the ledger's
own operations (ledger/accounts/keys.py, ledger/tokens/grants.py), the ones that the admin command
line runs.
"""
from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.chaos_plan import STREAM_OK, answer_problem, stream_end

PASSWORD = "chaos soak password"
PROMPTS = ("The sky is", "Once upon a time", "The old lighthouse keeper climbed the stairs and saw",
           "In 1969 the first", "def fibonacci(n):", "Grass is green and")


@dataclass
class Account:
    user_id: uuid.UUID
    name: str
    email: str
    key: str
    near_end: bool  # a Budget that the soak spends to its end


@dataclass
class Record:
    kind: str
    started_s: float
    status: int | None  # None: no answer (the connection failed before one)
    elapsed_s: float = 0.0
    error: Any = None  # the error object (a stream's error event), or the transport's error
    stream: str | None = None  # a stream's end (chaos_plan's DONE, ERROR_EVENT, ...)
    problem: str | None = None  # the answer is not the spec's error object, or a bad stream end
    ids: dict[str, Any] = field(default_factory=dict)  # the work it made: job, harvest, loom, run


async def make_accounts(database_url: str, count: int, near_end: int, tag: str) -> list[Account]:
    """`count` Users, each with a key; the first `near_end` have no monthly allowance and a Budget
    of a few thousand tokens (spent to its end during the soak), the rest a large Budget."""
    from ledger.accounts import passwords
    from ledger.accounts.keys import create_api_key
    from ledger.accounts.tables import Role, User
    from ledger.store.coltypes import utcnow
    from ledger.store.db import make_engine, session_factory
    from ledger.tokens.grants import grant, set_allowance

    engine = make_engine(database_url)
    accounts = []
    try:
        sessions = session_factory(engine)
        for i in range(count):
            email = f"chaos-{tag}-{i}@example.org"
            user = User(name=f"chaos-{tag}-{i}", email=email, role=Role.user,
                        password_hash=passwords.hash_password(PASSWORD), password_set_at=utcnow())
            async with sessions() as session:
                session.add(user)
                await session.commit()
                await session.refresh(user)
                _, raw = await create_api_key(session, user.id, "chaos")
                await session.commit()
            near = i < near_end
            async with sessions() as session:
                await set_allowance(session, user.id, 0 if near else None)
            async with sessions() as session:
                await grant(session, user.id, 4000 if near else 5_000_000, note="chaos soak")
            accounts.append(Account(user.id, user.name, email, raw, near))
    finally:
        await engine.dispose()
    return accounts


def _carry_cookies(app: httpx.AsyncClient) -> None:
    """Send the App's cookies as a header of their own, and the CSRF token as its header: the
    cluster's cookies are Secure (ACS_SESSION_COOKIE_SECURE, for the App behind TLS), which a
    cookie jar keeps from a plain-http loopback address."""
    app.headers["Cookie"] = "; ".join(f"{cookie.name}={cookie.value}" for cookie in app.cookies.jar)
    app.headers["X-CSRF-Token"] = app.cookies.get("acs_csrf") or ""


async def sign_in(base_url: str, account: Account) -> httpx.AsyncClient:
    """An App session of `account`: the CSRF cookie, POST /account/sign-in, and the CSRF header
    that each write sends (a sign-in sets a new token)."""
    app = httpx.AsyncClient(base_url=base_url, timeout=120, trust_env=False)
    answer = await app.get("/account/csrf")
    if answer.status_code != 204:
        raise RuntimeError(f"GET /account/csrf: {answer.status_code} {answer.text[:300]}")
    _carry_cookies(app)
    answer = await app.post("/account/sign-in", json={"email": account.email, "password": PASSWORD})
    if answer.status_code != 200:
        raise RuntimeError(f"sign-in: {answer.status_code} {answer.text[:300]}")
    _carry_cookies(app)
    return app


@dataclass
class ModelFacts:
    id: str
    hidden_size: int
    n_layers: int
    activations: bool


class Traffic:
    """Sends the soak's mixed requests and records each."""

    def __init__(self, base_url: str, accounts: list[Account], app: httpx.AsyncClient,
                 models: list[ModelFacts], harvest_model: str, rng: random.Random, start: float) -> None:
        self.base_url, self.accounts, self.app, self.models = base_url, accounts, app, models
        self.harvest_model, self.rng, self.start = harvest_model, rng, start
        self.http = httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(120, connect=10), trust_env=False,
                                      limits=httpx.Limits(max_connections=64))
        self.records: list[Record] = []
        self.harvests: list[dict[str, Any]] = []  # each harvest accepted: its id, key, body

    def _key(self, account: Account) -> dict[str, str]:
        return {"Authorization": f"Bearer {account.key}"}

    def _completion_body(self, stream: bool) -> tuple[str, dict[str, Any]]:
        model = self.rng.choice(self.models)
        body: dict[str, Any] = {"model": model.id, "prompt": self.rng.choice(PROMPTS),
                                "max_tokens": self.rng.randint(4, 24), "temperature": 0.7,
                                "seed": self.rng.randrange(1 << 20)}
        tags = []
        if model.activations and self.rng.random() < 0.3:
            body["output_residual_stream"] = [0]
            tags.append("activations")
        if model.activations and self.rng.random() < 0.3:
            body["apply_steering_vectors"] = [{"activations": [[0.01] * model.hidden_size], "layer_indices": [0],
                                               "scale": 2.0}]
            tags.append("steering")
        if stream:
            body["stream"] = True
        kind = "completion" + ("_stream" if stream else "") + "".join(f"+{t}" for t in tags)
        return kind, body

    async def one(self, kind: str) -> Record:
        """One request of a kind of KINDS, recorded."""
        account = self.rng.choice(self.accounts)
        record = Record(kind, round(time.monotonic() - self.start, 2), None)
        t0 = time.monotonic()
        try:
            await getattr(self, f"_{kind}")(account, record)
        except httpx.HTTPError as e:
            record.error = f"{type(e).__name__}: {str(e)[:200]}"
        except Exception as e:  # noqa: BLE001 - an answer this client did not expect is recorded; the soak goes on
            record.error = f"client: {type(e).__name__}: {str(e)[:200]}"
        record.elapsed_s = round(time.monotonic() - t0, 3)
        self.records.append(record)
        return record

    def _answered(self, record: Record, answer: httpx.Response) -> Any:
        record.status = answer.status_code
        record.problem = answer_problem(answer.status_code, answer.text)
        try:
            body = answer.json()
        except ValueError:
            body = None
        if answer.status_code >= 400:
            record.error = body.get("error") if isinstance(body, dict) else answer.text[:300]
            return None
        return body

    async def _completion(self, account: Account, record: Record) -> None:
        record.kind, body = self._completion_body(stream=False)
        self._answered(record, await self.http.post("/v1/completions", json=body, headers=self._key(account)))

    async def _completion_stream(self, account: Account, record: Record) -> None:
        record.kind, body = self._completion_body(stream=True)
        events: list[str] = []
        broke = False
        try:
            async with self.http.stream("POST", "/v1/completions", json=body, headers=self._key(account)) as answer:
                if answer.status_code != 200:
                    await answer.aread()
                    self._answered(record, answer)
                    return
                record.status = 200
                async for line in answer.aiter_lines():
                    if line.startswith("data: "):
                        events.append(line[len("data: "):])
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.ReadTimeout) as e:
            broke = True
            record.error = f"{type(e).__name__}: {str(e)[:200]}"
        record.stream = stream_end(events, broke)
        if record.stream not in STREAM_OK:
            record.problem = f"stream ended {record.stream}: last events {events[-3:]!r}"
        elif record.stream == "error_event":
            record.error = next(data["error"] for data in map(_parsed, reversed(events)) if "error" in data)

    async def _job(self, account: Account, record: Record) -> None:
        model = self.rng.choice(self.models)
        body = {"model": model.id, "prompt": [self.rng.choice(PROMPTS) for _ in range(self.rng.randint(1, 3))],
                "max_tokens": self.rng.randint(4, 16), "temperature": 0}
        made = self._answered(record, await self.http.post("/v1/completion-jobs", json=body,
                                                           headers=self._key(account)))
        if made:
            record.ids = {"job": made["id"], "key": account.key}

    async def _harvest(self, account: Account, record: Record) -> None:
        prompts = self.rng.sample(PROMPTS, self.rng.randint(1, 3))
        body = {"model": self.harvest_model, "prompts": prompts, "layers": [0, 1], "shard_size": 2}
        made = self._answered(record, await self.http.post("/v1/harvest", json=body, headers=self._key(account)))
        if made:
            record.ids = {"harvest": made["job_id"], "key": account.key}
            self.harvests.append({"id": made["job_id"], "key": account.key, "body": body})

    async def _loom_branch(self, account: Account, record: Record) -> None:
        loom = self._answered(record, await self.http.post("/v1/looms", json={"prompt": self.rng.choice(PROMPTS)},
                                                           headers=self._key(account)))
        if not loom:
            return
        root = loom["nodes"][0]["id"]
        body = {"model": self.rng.choice(self.models).id, "max_tokens": self.rng.randint(4, 16),
                "n": self.rng.randint(1, 3)}
        record.ids = {"loom": loom["id"], "key": account.key}
        self._answered(record, await self.http.post(f"/v1/looms/{loom['id']}/nodes/{root}/branch", json=body,
                                                    headers=self._key(account)))

    async def _playground_run(self, account: Account, record: Record) -> None:
        del account  # a Run is the signed-in User's, with no key
        model = self.rng.choice(self.models)
        body = {"requests": [{"model": model.id, "prompt": self.rng.choice(PROMPTS),
                              "max_tokens": self.rng.randint(4, 24)}]}
        made = self._answered(record, await self.app.post("/account/runs", json=body))
        if made and made.get("runs"):
            record.ids = {"run": made["runs"][0]["id"]}

    async def aclose(self) -> None:
        await self.http.aclose()


def _parsed(event: str) -> dict[str, Any]:
    try:
        data = json.loads(event)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


# The kinds of traffic and their weights in the mix.
KINDS: dict[str, float] = {"completion": 4, "completion_stream": 4, "job": 2, "harvest": 0.5,
                           "loom_branch": 1.5, "playground_run": 1.5}


async def drive(traffic: Traffic, until: float, concurrency: int) -> None:
    """`concurrency` clients, each sending one request after another of a kind drawn from KINDS,
    until `until` (time.monotonic())."""
    kinds, weights = list(KINDS), list(KINDS.values())

    async def client() -> None:
        while time.monotonic() < until:
            await traffic.one(traffic.rng.choices(kinds, weights)[0])
            await asyncio.sleep(traffic.rng.uniform(0.05, 0.5))

    await asyncio.gather(*(client() for _ in range(concurrency)))
