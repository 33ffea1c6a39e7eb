"""The harvest routes on the fake stack, to the letter of the spec: POST /v1/harvest
(validation, the model, the body cap, the spend stop, the tokens, the caps,
Idempotency-Key), GET /v1/harvest/{job_id} (its JSON, links of a done harvest,
progress, `wait` and the long-poll caps), DELETE (the cancel rules and their
charges), and the admin command line's harvest commands.

No Runner runs here: the tests change the rows in the ledger as a Runner
would, and take a running harvest's Hold with the ledger's own calls.
"""
from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import re
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, AsyncIterator
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
import pytest_asyncio
from sqlalchemy import delete, update
from sqlmodel import select

from api.app import EXPOSED_HEADERS
from domain.harvests.validation import decode_projection
from deployments.catalog import Catalog
from harvest.links import verify
from cluster.admin_cli import commands as admin
from ledger.store.coltypes import utcnow
from ledger.tokens.grants import set_allowance
from ledger.accounts.keys import authenticate
from ledger.accounts.tables import User
from ledger.tokens.tables import Hold, HoldState, MonthlyUsage, UsageSource
from ledger.work.tables import Harvest, Work, WorkStatus
from ledger.tokens.spend import set_spend_stop
from ledger.tokens.holds import HoldAsk, Held, month_of, take_hold
from tests.accounts import another_key, principal
from tests.ledger_fixtures import run_in_thread
from tests.spec import assert_error, validate

SKY = {"model": "llama-8b", "prompts": ["The sky is", "Grass is"]}
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$")
NOV_15 = datetime(2026, 11, 15, 12, 0, 0, tzinfo=timezone.utc)
TINY_LAYERS = "acs/tiny-llama-random has layers 0 to 3: it has no layer {layer}."
SMALL_FULL = ("You have 3 harvests on small models queued or running, your most. "
              "Submit another when one ends, or cancel one.")
LARGE_FULL = ("You have 1 harvest on large models queued or running, your most. "
              "Submit another when one ends, or cancel one.")
CAPACITY_FULL = ("All Users together have 2 harvests on large models queued or running, the most that the API "
                 "takes. Submit again when one of them ends.")


class Clock:
    """The routes' clock: a fixed moment, or the real time while `now` is None."""

    def __init__(self) -> None:
        self.now: datetime | None = None

    def __call__(self) -> datetime:
        return self.now or utcnow()


@dataclasses.dataclass
class Harvests:
    stack: Any
    clock: Clock

    async def submit(self, body: Any = None, key: str | None = None, **headers: str) -> Any:
        auth = {"Authorization": f"Bearer {key or self.stack.key}"}
        if isinstance(body, (str, bytes)):
            return await self.stack.http.post("/v1/harvest", content=body, headers={**auth, **headers})
        return await self.stack.http.post("/v1/harvest", json=SKY if body is None else body,
                                          headers={**auth, **headers})

    async def get(self, job_id: str, key: str | None = None, **params: Any) -> Any:
        auth = {"Authorization": f"Bearer {key or self.stack.key}"}
        return await self.stack.http.get(f"/v1/harvest/{job_id}", params=params, headers=auth)

    async def delete(self, job_id: str, key: str | None = None) -> Any:
        auth = {"Authorization": f"Bearer {key or self.stack.key}"}
        return await self.stack.http.delete(f"/v1/harvest/{job_id}", headers=auth)

    async def created(self, body: Any = None, key: str | None = None) -> dict:
        r = await self.submit(body, key)
        assert r.status_code == 202, r.text
        validate(r.json(), "HarvestJob")
        return r.json()

    async def rows(self) -> list[tuple[Work, Harvest]]:
        async with self.stack.services.sessions() as session:
            return list((await session.exec(select(Work, Harvest).join(Harvest, Harvest.work_id == Work.id)
                                            .order_by(Work.created_at))).all())

    async def change(self, job_id: str, harvest: dict | None = None, **work: Any) -> None:
        """Change the rows as the Runner would."""
        work_id = uuid.UUID(job_id)
        async with self.stack.services.ledger.write_sessions() as session:
            if work:
                await session.exec(update(Work).where(Work.id == work_id).values(**work))
            if harvest:
                await session.exec(update(Harvest).where(Harvest.work_id == work_id).values(**harvest))
            await session.commit()

    async def run(self, job_id: str, gpu_started: bool) -> Held:
        """The harvest `running` with its Hold, as the Runner starts it; its GPU run started or not."""
        (work, harvest), = [row for row in await self.rows() if str(row[0].id) == job_id]
        ask = HoldAsk(user_id=work.user_id, key_id=work.key_id, model=work.model_id,
                      prompt_tokens=harvest.reserved_tokens, choices=0, max_tokens=0, may_lower=False,
                      source=UsageSource.harvest, request_id=work.request_id, owner="runner-test", lease_s=600)
        async with self.stack.services.ledger.write_sessions() as session:
            held = await take_hold(session, ask)
        await self.change(job_id, status=WorkStatus.running, started_at=utcnow(), hold_id=held.hold_id,
                          lease_owner="runner-test", lease_until=utcnow() + timedelta(minutes=10), attempts=1,
                          harvest={"gpu_started_at": utcnow()} if gpu_started else None)
        return held

    async def hold(self, hold_id: uuid.UUID) -> Hold:
        async with self.stack.services.sessions() as session:
            return await session.get(Hold, hold_id)

    async def month_used(self, user_id: uuid.UUID) -> int:
        async with self.stack.services.sessions() as session:
            row = await session.get(MonthlyUsage, (user_id, month_of(utcnow())))
            return 0 if row is None else row.used


def harvest_catalog(catalog: Catalog) -> Catalog:
    """The test profile's model, plus a large model and a served model that does not harvest."""
    tiny = catalog.models["tiny-llama"]
    big = tiny.model_copy(update={"id": "big-llama", "served_model_name": "acs/big-llama", "harvest_class": "large"})
    other = tiny.model_copy(update={"id": "big-trinity", "served_model_name": "acs/big-trinity",
                                    "harvest_class": "large"})
    plain = tiny.model_copy(update={"id": "plain-llama", "served_model_name": "acs/plain-llama", "harvest": False})
    return Catalog(models={"tiny-llama": tiny, "big-llama": big, "big-trinity": other, "plain-llama": plain},
                   default_id="tiny-llama", aliases=catalog.aliases)


async def _no_work(stack: Any) -> None:
    async with stack.services.ledger.write_sessions() as session:
        await session.exec(delete(Harvest))  # first: a harvest row refers to its work row
        await session.exec(delete(Work))
        await session.commit()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def composed(clock: Clock) -> dict[str, Any]:
    """The stack's clock is the test's: the harvest routes read it."""
    return {"clock": clock}


@pytest_asyncio.fixture
async def h(fake_stack: Any, clock: Clock) -> AsyncIterator[Harvests]:
    await _no_work(fake_stack)
    fake_stack.replace_services(catalog=harvest_catalog(fake_stack.services.catalog))
    yield Harvests(fake_stack, clock)
    # Leave no harvest rows: other modules' fixtures empty the work table alone.
    await _no_work(fake_stack)


async def who(stack: Any, key: str) -> Any:
    async with stack.services.sessions() as session:
        return await authenticate(session, f"Bearer {key}")


def directions(k: int, hidden: int, dtype: str = "float32", rows: np.ndarray | None = None) -> dict:
    values = np.random.default_rng(0).standard_normal((k, hidden)).astype(np.float32) if rows is None else rows
    if dtype == "bfloat16":
        raw = (values.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()
    else:
        raw = values.astype("<f4" if dtype == "float32" else "<f2").tobytes()
    return {"data": base64.b64encode(raw).decode(), "dtype": dtype, "shape": [k, hidden]}


# -- submit ------------------------------------------------------------------------------------------------


async def test_submit_answers_202_with_the_pending_harvest_and_holds_nothing(h: Harvests) -> None:
    used = await h.month_used((await principal(h.stack)).user_id)
    r = await h.submit({**SKY, "layers": [3, 1, 1]})
    assert r.status_code == 202, r.text
    job = r.json()
    validate(job, "HarvestJob")
    assert uuid.UUID(job["job_id"]).version == 7 and job["run_id"] == job["job_id"]
    assert {k: job[k] for k in ("status", "model", "n_prompts", "layers", "tokens", "started_at",
                                "completed_at")} == {
        "status": "pending", "model": "llama-8b", "n_prompts": 2, "layers": [1, 3], "tokens": None,
        "started_at": None, "completed_at": None}
    assert job["reserved_tokens"] == len("The sky is") + len("Grass is") + 2  # bytes, and a start token each
    assert ISO.match(job["created_at"])
    assert not {"result", "urls_expire_at", "error"} & set(job)
    assert "location" not in r.headers
    (work, harvest), = await h.rows()
    assert (work.kind.value, work.status, work.model, work.model_id, work.request_id) == (
        "harvest", WorkStatus.queued, "llama-8b", "tiny-llama", "req_harvest_" + job["job_id"].replace("-", ""))
    assert json.loads(work.request) == {"model": "llama-8b", "prompts": SKY["prompts"], "layers": [1, 3],
                                        "shard_size": 32, "batch_size": None, "add_special_tokens": True,
                                        "project_onto": None}
    assert (harvest.model_class, harvest.n_prompts, harvest.reserved_tokens, json.loads(harvest.layers),
            harvest.gpu_started_at, harvest.prompts_done) == ("small", 2, 20, [1, 3], None, 0)
    assert await h.month_used(work.user_id) == used  # the Runner takes the Hold when it starts


async def test_fields_left_out_or_null_get_their_defaults(h: Harvests) -> None:
    nulls = {"layers": None, "shard_size": None, "batch_size": None, "add_special_tokens": None,
             "project_onto": None}
    for body in (SKY, {**SKY, **nulls}):
        job = await h.created(body)
        assert job["layers"] == [1, 2, 3]  # the quartiles of 4 Layers: 4 / 4, / 2 and × 3 / 4
        assert job["reserved_tokens"] == 20
    for work, _ in await h.rows():
        request = json.loads(work.request)
        assert (request["shard_size"], request["batch_size"], request["add_special_tokens"]) == (32, None, True)


async def test_all_layers_sizes_and_start_tokens(h: Harvests) -> None:
    job = await h.created({**SKY, "layers": "all", "shard_size": 4096, "batch_size": 64})
    assert job["layers"] == [0, 1, 2, 3]
    # Without start tokens the Hold is the UTF-8 bytes alone; "é" is 2 bytes, "日本" 6.
    job = await h.created({"model": "tiny-llama", "prompts": ["é", "日本"], "add_special_tokens": False,
                           "shard_size": 1, "batch_size": 1})
    assert job["reserved_tokens"] == 8 and job["model"] == "tiny-llama"
    request = json.loads((await h.rows())[1][0].request)
    assert (request["shard_size"], request["batch_size"], request["add_special_tokens"]) == (1, 1, False)


def _refusals() -> list[tuple[Any, str, str | None]]:
    bad_bytes = {**directions(1, 3), "data": base64.b64encode(b"\0" * 8).decode()}
    return [
        ({**SKY, "prompt": "x"}, "Unknown parameter: 'prompt'.", "prompt"),
        ({"prompts": ["a"]}, "Missing required parameter: 'model'.", "model"),
        ({"model": "llama-8b"}, "Missing required parameter: 'prompts'.", "prompts"),
        ({**SKY, "model": 8}, "Invalid type for 'model': expected a string.", "model"),
        ({**SKY, "prompts": "The sky is"}, "Invalid type for 'prompts': expected a list of strings.", "prompts"),
        ({**SKY, "prompts": []}, "Invalid value for 'prompts': expected a list of 1 to 4096 texts.", "prompts"),
        ({**SKY, "prompts": ["a"] * 4097}, "Invalid value for 'prompts': expected a list of 1 to 4096 texts.",
         "prompts"),
        ({**SKY, "prompts": ["a", ""]}, "Invalid value for 'prompts[1]': expected a text of 1 or more characters.",
         "prompts"),
        ({**SKY, "prompts": [[128000, 791]]}, "Invalid type for 'prompts[0]': expected a string.", "prompts"),
        ({**SKY, "prompts": ["a\u0000b"]}, "A text cannot hold the character U+0000 (NUL).", "prompts"),
        ('{"model": "llama-8b", "prompts": ["ok", "half \\ud800 of a pair"]}',
         "Invalid value for 'prompts[1]': expected a text without half of a surrogate pair, such as a lone \\ud800.",
         "prompts"),
        ({**SKY, "prompts": ["a" * 4_000_000, "b" * 4_000_001]},
         "At most 2000000 tokens of prompts in one harvest, counted as characters / 4: the prompts have "
         "8000001 characters, 2000001 tokens.", "prompts"),
        ({**SKY, "layers": "some"}, "Invalid value for 'layers': expected a list of numbers or 'all'.", "layers"),
        ({**SKY, "layers": 8}, "Invalid type for 'layers': expected a list of numbers or 'all'.", "layers"),
        ({**SKY, "layers": []}, "Invalid value for 'layers': expected a list of 1 to 256 Layers.", "layers"),
        ({**SKY, "layers": [0] * 257}, "Invalid value for 'layers': expected a list of 1 to 256 Layers.", "layers"),
        ({**SKY, "layers": ["1"]}, "Invalid type for 'layers[0]': expected a number.", "layers"),
        ({**SKY, "layers": [1, -1]}, "Invalid value for 'layers[1]': expected a value greater than or equal to 0.",
         "layers"),
        ({**SKY, "layers": [1.5]}, "Invalid value for 'layers[0]': expected a whole number.", "layers"),
        ({**SKY, "layers": [0, 4]}, TINY_LAYERS.format(layer=4), "layers"),
        ({**SKY, "layers": [40, 9, 2]}, TINY_LAYERS.format(layer=9), "layers"),
        ({**SKY, "shard_size": 0}, "Invalid value for 'shard_size': expected a value greater than or equal to 1.",
         "shard_size"),
        ({**SKY, "shard_size": 4097}, "Invalid value for 'shard_size': expected a value less than or equal to 4096.",
         "shard_size"),
        ({**SKY, "shard_size": "32"}, "Invalid type for 'shard_size': expected a number.", "shard_size"),
        ({**SKY, "batch_size": 0}, "Invalid value for 'batch_size': expected a value greater than or equal to 1.",
         "batch_size"),
        ({**SKY, "batch_size": 65}, "Invalid value for 'batch_size': expected a value less than or equal to 64.",
         "batch_size"),
        ({**SKY, "batch_size": "8"}, "Invalid type for 'batch_size': expected a number or null.", "batch_size"),
        ({**SKY, "add_special_tokens": 1}, "Invalid type for 'add_special_tokens': expected a boolean.",
         "add_special_tokens"),
        ({**SKY, "project_onto": "x"}, "Invalid type for 'project_onto': expected an object or null.",
         "project_onto"),
        ({**SKY, "project_onto": {**directions(1, 64), "scale": 2}}, "Unknown parameter: 'project_onto.scale'.",
         "project_onto"),
        ({**SKY, "project_onto": {"dtype": "float32", "shape": [1, 64]}},
         "Missing required parameter: 'project_onto.data'.", "project_onto"),
        ({**SKY, "project_onto": {**directions(1, 64), "dtype": "float64"}},
         "Invalid value for 'project_onto.dtype': expected 'float32', 'float16', or 'bfloat16'.", "project_onto"),
        ({**SKY, "project_onto": {**directions(1, 64), "shape": [64]}},
         "Invalid value for 'project_onto.shape': expected a list of two numbers, [directions, hidden size].",
         "project_onto"),
        ({**SKY, "project_onto": directions(65, 64)},
         "Invalid value for 'project_onto.shape[0]': expected a value less than or equal to 64.", "project_onto"),
        ({**SKY, "project_onto": {**directions(1, 64), "shape": [0, 64]}},
         "Invalid value for 'project_onto.shape[0]': expected a value greater than or equal to 1.", "project_onto"),
        ({**SKY, "project_onto": {**directions(1, 64), "compression": "zstd"}},
         "Invalid value for 'project_onto.compression': expected 'none'.", "project_onto"),
        # The four messages of the spec's table, word for word.
        ({**SKY, "project_onto": bad_bytes}, "project_onto.data is 8 bytes; the shape 1 × 3 of float32 needs 12.",
         "project_onto"),
        ({**SKY, "project_onto": directions(2, 64, rows=np.array([[1.0] * 64, [np.nan] * 64], np.float32))},
         "project_onto has numbers that are not finite.", "project_onto"),
        ({**SKY, "project_onto": directions(2, 64, "float16", rows=np.array([[1.0] * 64, [0.0] * 64], np.float32))},
         "project_onto has a direction whose length is 0.", "project_onto"),
        ({**SKY, "project_onto": {**directions(1, 64), "data": "AAAA$AAA"}}, "project_onto.data is not valid base64.",
         "project_onto"),
        # Directions of another hidden size (the tiny model's is 64).
        ({**SKY, "project_onto": directions(2, 4096)},
         "A direction of project_onto has 4096 numbers, but the model's hidden size is 64.", "project_onto"),
        ([SKY], "Invalid type for the request body: expected an object.", None),
    ]


@pytest.mark.parametrize("body,message,param", _refusals(), ids=lambda v: str(v)[:40] if isinstance(v, str) else None)
async def test_each_refusal_has_its_message_and_param_and_creates_nothing(h: Harvests, body: Any, message: str,
                                                                          param: str | None) -> None:
    assert_error(await h.submit(body), 400, "invalid_request", message=message, param=param,
                 type="invalid_request_error")
    assert await h.rows() == []


async def test_a_body_that_is_not_json_is_bad_json(h: Harvests) -> None:
    assert_error(await h.submit('{"model": "llama-8b",'), 400, "bad_json", param=None)


async def test_the_model_not_served_or_not_harvested(h: Harvests) -> None:
    assert_error(await h.submit({**SKY, "model": "gpt-2"}), 400, "model_not_found", param="model", message=(
        "The model `gpt-2` does not exist. The API serves tiny-llama, big-llama, big-trinity, plain-llama."))
    assert_error(await h.submit({**SKY, "model": "plain-llama"}), 400, "harvest_unsupported", param="model",
                 type="invalid_request_error", message=(
                     "The API serves the model `plain-llama` but does not harvest it. "
                     "The API harvests tiny-llama, big-llama, big-trinity."))
    assert await h.rows() == []


async def test_directions_are_decoded_in_each_dtype_and_kept_normalized(h: Harvests) -> None:
    rows = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    for dtype, exact in (("float32", rows), ("float16", rows.astype(np.float16).astype(np.float32)),
                         ("bfloat16", ((rows.view("<u4") >> 16) << 16).view("<f4"))):
        sent = directions(3, 64, dtype, rows=rows)
        # Spaces, tabs and line breaks in data are allowed; so is data without its padding.
        spaced = {**sent, "data": " \n".join([sent["data"][:10], sent["data"][10:].rstrip("=")]) + "\t",
                  "compression": "none"}
        await h.created({**SKY, "project_onto": spaced})
        stored = json.loads((await h.rows())[-1][0].request)["project_onto"]
        assert stored == {"data": sent["data"], "dtype": dtype, "shape": [3, 64], "compression": "none"}
        decoded = decode_projection(stored)
        assert decoded.dtype == np.float32 and decoded.shape == (3, 64)
        np.testing.assert_array_equal(decoded, exact)


@pytest.mark.settings(harvest_max_body_bytes=64 * 1024)
async def test_the_body_cap_of_post_harvest_counts_chunked_bodies_and_the_key_comes_first(h: Harvests) -> None:
    big = json.dumps({**SKY, "prompts": ["x" * 70 * 1024]}).encode()
    too_large = dict(status=413, code="request_too_large", headers={"x-should-retry": "false"},
                     message="The request body is larger than 65536 bytes.")
    assert_error(await h.submit(big), **too_large)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        for start in range(0, len(big), 8192):
            yield big[start:start + 8192]

    r = await h.stack.http.post("/v1/harvest", content=chunks(), headers=h.stack.auth())
    assert "content-length" not in r.request.headers
    assert_error(r, **too_large)
    assert_error(await h.stack.http.post("/v1/harvest", content=big), 401, "missing_authorization")
    assert await h.rows() == []


async def test_post_harvest_takes_bodies_over_8_mib_and_up_to_50(h: Harvests) -> None:
    assert h.stack.services.settings.harvest_max_body_bytes == 50 * 1024 * 1024
    nine_mib = {**SKY, "prompts": ["x" * (9 * 1024 * 1024)]}
    # Past 8 MiB the body still reaches validation: its prompts' cap answers, not 413.
    assert_error(await h.submit(nine_mib), 400, "invalid_request", param="prompts",
                 message=re.compile(r"^At most 2000000 tokens of prompts"))
    over = b" " * (50 * 1024 * 1024 + 1)
    assert_error(await h.submit(over), 413, "request_too_large",
                 message="The request body is larger than 52428800 bytes.")
    assert_error(await h.stack.http.post("/v1/completion-jobs", content=b" " * (8 * 1024 * 1024 + 1),
                                         headers=h.stack.auth()), 413, "request_too_large")


async def test_budget_exceeded_when_the_tokens_cannot_hold_the_prompts(h: Harvests) -> None:
    who = await principal(h.stack)
    async with h.stack.services.ledger.write_sessions() as session:
        await set_allowance(session, who.user_id, 19)
    assert_error(await h.submit(), 429, "budget_exceeded", headers={"x-should-retry": "false"}, message=re.compile(
        r"^This request can use up to 20 tokens, more than your monthly allowance has left this month"))
    assert await h.rows() == []
    async with h.stack.services.ledger.write_sessions() as session:
        await set_allowance(session, who.user_id, 20)
    await h.created()  # exactly fits, and holds nothing: a second one fits too
    await h.created()
    async with h.stack.services.sessions() as session:
        assert (await session.exec(select(Hold).where(Hold.user_id == who.user_id))).all() == []


async def test_spend_cap_refuses_new_harvests(h: Harvests) -> None:
    async with h.stack.services.ledger.write_sessions() as session:
        await set_spend_stop(session, True, "test")
    await asyncio.sleep(1.1)  # the API reads the stop at most once a second
    try:
        assert_error(await h.submit(), 429, "spend_cap", headers={"Retry-After": "3600", "x-should-retry": "false"})
        assert await h.rows() == []
    finally:
        async with h.stack.services.ledger.write_sessions() as session:
            await set_spend_stop(session, False)
        await asyncio.sleep(1.1)


# -- Idempotency-Key ------------------------------------------------------------------------------------------


async def test_the_same_idempotency_key_answers_the_harvest_as_it_is_now(h: Harvests) -> None:
    first = await h.submit(**{"Idempotency-Key": "harvest-001"})
    assert first.status_code == 202
    job_id = first.json()["job_id"]
    await h.change(job_id, status=WorkStatus.running, harvest={"gpu_started_at": utcnow()})
    again = await h.submit(**{"Idempotency-Key": "harvest-001"}, key=await another_key(h.stack))  # any key of the User
    assert again.status_code == 200
    validate(again.json(), "HarvestJob")
    assert (again.json()["job_id"], again.json()["status"]) == (job_id, "running")
    assert len(await h.rows()) == 1
    assert_error(await h.submit({**SKY, "prompts": ["other"]}, **{"Idempotency-Key": "harvest-001"}), 409,
                 "idempotency_conflict", headers={"x-should-retry": "false"})


async def test_a_refused_submit_frees_its_idempotency_key(h: Harvests) -> None:
    for _ in range(3):
        await h.created()
    assert_error(await h.submit(**{"Idempotency-Key": "k-2"}), 429, "harvest_concurrency_exceeded")
    (work, _), *_ = await h.rows()
    await h.delete(str(work.id))
    assert (await h.submit(**{"Idempotency-Key": "k-2"})).status_code == 202


# -- the caps ---------------------------------------------------------------------------------------------------


async def test_three_harvests_on_small_models_of_one_user(h: Harvests) -> None:
    jobs = [await h.created() for _ in range(3)]
    for key in (None, await another_key(h.stack)):  # the cap is the User's, across keys
        assert_error(await h.submit(key=key), 429, "harvest_concurrency_exceeded", message=SMALL_FULL,
                     headers={"Retry-After": "30"}, type="invalid_request_error")
    r = await h.submit()
    assert "x-should-retry" not in r.headers
    assert (await h.submit(key=await another_key(h.stack, same_user=False))).status_code == 202  # another User
    await h.change(jobs[0]["job_id"], status=WorkStatus.succeeded, finished_at=utcnow(),
                   result_body=json.dumps({"tokens": 0, "result": {}}))
    await h.created()  # one ended: its place is free
    assert_error(await h.submit(), 429, "harvest_concurrency_exceeded")
    assert (await h.delete(jobs[1]["job_id"])).status_code == 200  # a cancel frees one too
    await h.created()


async def test_one_harvest_on_large_models_of_one_user_and_two_of_all_users(h: Harvests) -> None:
    big = {**SKY, "model": "big-llama"}
    await h.created(big)
    assert_error(await h.submit({**big, "model": "big-trinity"}), 429, "harvest_concurrency_exceeded",
                 message=LARGE_FULL, headers={"Retry-After": "30"})
    await h.created()  # small models have caps of their own
    second = await another_key(h.stack, same_user=False)
    await h.created({**big, "model": "big-trinity"}, key=second)
    third = await another_key(h.stack, same_user=False)
    assert_error(await h.submit(big, key=third), 429, "harvest_capacity_exceeded", message=CAPACITY_FULL,
                 headers={"Retry-After": "30"}, type="invalid_request_error")
    assert (await h.submit(key=third)).status_code == 202
    assert {harvest.model_class for _, harvest in await h.rows()} == {"small", "large"}


@pytest.mark.postgres
async def test_submits_at_once_never_pass_a_cap_together(h: Harvests) -> None:
    """The queue row's lock orders the counts and inserts of submits that arrive together."""
    answers = await asyncio.gather(*(h.submit() for _ in range(8)))
    assert sorted(a.status_code for a in answers) == [202] * 3 + [429] * 5
    assert len(await h.rows()) == 3
    keys = [await another_key(h.stack, same_user=False) for _ in range(4)]
    answers = await asyncio.gather(*(h.submit({**SKY, "model": "big-llama"}, key=key) for key in keys))
    assert sorted(a.status_code for a in answers) == [202] * 2 + [429] * 2
    assert {a.json()["error"]["code"] for a in answers if a.status_code == 429} == {"harvest_capacity_exceeded"}


async def _harvest_rows(h: Harvests, key: str, count: int, created_at: datetime, **values: Any) -> None:
    """Harvests of `key` made `created_at`, as the Runner would have left them."""
    owner = await who(h.stack, key)
    gpu_started_at = values.pop("gpu_started_at", None)
    async with h.stack.services.ledger.write_sessions() as session:
        for _ in range(count):
            work = Work(kind="harvest", user_id=owner.user_id, key_id=owner.key_id, model="llama-8b",
                        model_id="tiny-llama", request="{}", request_id="req_harvest_x", created_at=created_at,
                        **values)
            session.add(work)
            await session.flush()
            session.add(Harvest(work_id=work.id, model_class="small", n_prompts=1, reserved_tokens=2, layers="[1]",
                                gpu_started_at=gpu_started_at))
        await session.commit()


async def test_two_hundred_harvests_a_key_a_month(h: Harvests) -> None:
    h.clock.now = NOV_15
    key = h.stack.key
    ran = dict(status=WorkStatus.succeeded, result_body='{"tokens": 2, "result": {}}', gpu_started_at=NOV_15)
    await _harvest_rows(h, key, 199, datetime(2026, 11, 1, tzinfo=timezone.utc), **ran)
    # Neither counts: last month's, and one whose GPU run never started (cancelled while pending).
    await _harvest_rows(h, key, 5, datetime(2026, 10, 31, 23, 59, tzinfo=timezone.utc), **ran)
    await _harvest_rows(h, key, 5, NOV_15, status=WorkStatus.cancelled, result_body='{"tokens": 0}')
    await h.created()  # the 200th: pending, it counts
    quota = dict(status=429, code="harvest_quota_exceeded", headers={"x-should-retry": "false"}, message=(
        "This API key started 200 harvests this UTC month, the most that one key may start. "
        "Submit again in the next month, from 2026-12-01 (UTC)."))
    assert_error(await h.submit(), **quota)
    assert "retry-after" not in (await h.submit()).headers
    assert (await h.submit(key=await another_key(h.stack))).status_code == 202  # the quota is each key's
    h.clock.now = datetime(2026, 12, 1, tzinfo=timezone.utc)
    assert (await h.submit()).status_code == 202  # a new month


async def test_an_admins_harvest_quota_and_what_the_month_counts(h: Harvests) -> None:
    h.clock.now = NOV_15
    user = await principal(h.stack)
    async with h.stack.services.ledger.write_sessions() as session:
        await session.exec(update(User).where(User.id == user.user_id).values(harvest_quota=2))
        await session.commit()
    pending = await h.created()
    await h.delete(pending["job_id"])  # cancelled while pending: not counted
    started = await h.created()
    await h.change(started["job_id"], status=WorkStatus.queued, harvest={"gpu_started_at": NOV_15})
    await h.delete(started["job_id"])  # pending again after a restart: its GPU run started, so it counts
    await h.created()
    assert_error(await h.submit(), 429, "harvest_quota_exceeded", message=re.compile(
        r"^This API key started 2 harvests this UTC month"))


# -- GET /v1/harvest/{job_id} ---------------------------------------------------------------------------------------


async def test_read_a_harvest_and_its_progress(h: Harvests) -> None:
    job = await h.created({**SKY, "prompts": ["a", "b", "c", "d"]})
    r = await h.get(job["job_id"])
    assert r.status_code == 200
    validate(r.json(), "HarvestJob")
    assert r.json() == job
    assert r.headers["x-acs-harvest-progress"] == "prompts=0/4"
    started = utcnow()
    await h.change(job["job_id"], status=WorkStatus.running, started_at=started,
                   harvest={"gpu_started_at": started, "prompts_done": 3})
    r = await h.get(job["job_id"], key=await another_key(h.stack))  # any key of the User
    validate(r.json(), "HarvestJob")
    assert (r.json()["status"], r.json()["tokens"], r.json()["completed_at"]) == ("running", None, None)
    assert ISO.match(r.json()["started_at"])
    assert r.headers["x-acs-harvest-progress"] == "prompts=3/4"
    assert "X-Acs-Harvest-Progress" in EXPOSED_HEADERS  # a browser may read it


async def test_ids_of_others_and_ids_that_are_not_uuids(h: Harvests) -> None:
    job = await h.created()
    stranger = await another_key(h.stack, same_user=False)
    missing = f"None of your harvests has the job_id {job['job_id']}."
    assert_error(await h.get(job["job_id"], key=stranger), 404, "harvest_job_not_found", message=missing)
    assert_error(await h.delete(job["job_id"], key=stranger), 404, "harvest_job_not_found", message=missing)
    other = str(uuid.uuid4())
    assert_error(await h.get(other), 404, "harvest_job_not_found",
                 message=f"None of your harvests has the job_id {other}.")
    for call in (h.get, h.delete):
        assert_error(await call("not-a-uuid"), 400, "invalid_request", param="job_id", message=(
            "Invalid value for 'job_id': expected a harvest's job_id, a UUID such as "
            "01a19d8b-2892-7afa-8b51-35c9fc2f5572."))
    assert (await h.get(job["job_id"])).json()["status"] == "pending"  # the stranger's cancel changed nothing


async def test_a_done_harvest_has_its_result_and_new_links_at_each_read(h: Harvests) -> None:
    job = await h.created()
    h.clock.now = NOV_15
    stored = {"n_shards": 2, "layer_indices": [1, 2, 3], "contents": "activations", "tokens": 9,
              "bytes_written": 4096, "timings": {"load_s": 0.0, "forward_s": 1.5, "save_s": 0.25, "upload_s": 0.0},
              "tokens_read": 9}
    await h.change(job["job_id"], status=WorkStatus.succeeded, finished_at=NOV_15, result_status=200,
                   result_body=json.dumps({"tokens": 9, "result": stored}),
                   harvest={"gpu_started_at": NOV_15 - timedelta(minutes=1), "prompts_done": 1})
    r = await h.get(job["job_id"])
    done = r.json()
    validate(done, "HarvestJob")
    assert r.headers["x-acs-harvest-progress"] == "prompts=2/2"
    assert (done["status"], done["tokens"], done["completed_at"], done["started_at"]) == (
        "done", 9, "2026-11-15T12:00:00.000+00:00", "2026-11-15T11:59:00.000+00:00")
    assert done["urls_expire_at"] == "2026-11-22T12:00:00.000+00:00"  # 7 days after this answer
    result = done["result"]
    assert {k: result[k] for k in ("n_shards", "layer_indices", "contents", "tokens", "bytes_written", "timings")} == {
        k: stored[k] for k in ("n_shards", "layer_indices", "contents", "tokens", "bytes_written", "timings")}
    assert "error" not in done and "tokens_read" not in result
    secret = h.stack.services.settings.harvest_link_secret.get_secret_value().encode()
    names = ["manifest.json", "stats.safetensors", "shard_00000.safetensors", "shard_00001.safetensors"]
    urls = [result["manifest_url"], result["stats_url"], *result["shard_urls"]]
    for name, url in zip(names, urls):
        parts = urlsplit(url)
        assert (parts.scheme, parts.netloc, parts.path) == ("http", "api.test", f"/v1/harvest-files/{job['job_id']}/{name}")
        query = parse_qs(parts.query)
        assert query["expires"] == [str(int(NOV_15.timestamp()) + 7 * 24 * 3600)]
        verify(secret, job["job_id"], name, query["expires"][0], query["signature"][0], now=NOV_15.timestamp())
    h.clock.now = NOV_15 + timedelta(hours=1)
    later = (await h.get(job["job_id"])).json()
    assert later["urls_expire_at"] == "2026-11-22T13:00:00.000+00:00"
    assert later["result"]["manifest_url"] != result["manifest_url"]


@pytest.mark.settings(public_base_url="https://harvests.example.org/")
async def test_links_use_the_public_base_url_when_it_is_set(h: Harvests) -> None:
    job = await h.created()
    await h.change(job["job_id"], status=WorkStatus.succeeded, finished_at=utcnow(), result_body=json.dumps(
        {"tokens": 1, "result": {"n_shards": 1, "layer_indices": [1], "contents": "activations", "tokens": 1,
                                 "bytes_written": 1, "timings": {"load_s": 0, "forward_s": 0, "save_s": 0,
                                                                 "upload_s": 0}}}))
    result = (await h.get(job["job_id"])).json()["result"]
    assert result["shard_urls"][0].startswith(
        f"https://harvests.example.org/v1/harvest-files/{job['job_id']}/shard_00000.safetensors?expires=")


async def test_a_failed_harvest_says_why_and_costs_nothing(h: Harvests) -> None:
    job = await h.created()
    why = "The GPU run did not end within its time limit of 60 minutes."
    await h.change(job["job_id"], status=WorkStatus.failed, finished_at=utcnow(),
                   result_body=json.dumps({"tokens": 0, "error": why}))
    failed = (await h.get(job["job_id"])).json()
    validate(failed, "HarvestJob")
    assert (failed["status"], failed["error"], failed["tokens"]) == ("failed", why, 0)
    assert ISO.match(failed["completed_at"]) and "result" not in failed and "urls_expire_at" not in failed


# -- wait and the long-poll caps ---------------------------------------------------------------------------------------


async def test_wait_answers_when_the_status_changes(h: Harvests) -> None:
    job = await h.created()

    async def start_soon() -> None:
        await asyncio.sleep(0.6)
        await h.change(job["job_id"], status=WorkStatus.running)

    started = time.monotonic()
    changer = asyncio.create_task(start_soon())
    r = await h.get(job["job_id"], wait="5")
    await changer
    assert 0.6 <= time.monotonic() - started < 1.5  # within a poll of the change
    assert r.json()["status"] == "running" and "x-acs-longpoll" not in r.headers
    started = time.monotonic()
    r = await h.get(job["job_id"], wait="0.5")  # no change: answers after the wait
    assert 0.5 <= time.monotonic() - started < 1.2 and r.json()["status"] == "running"
    await h.change(job["job_id"], status=WorkStatus.succeeded, finished_at=utcnow(),
                   result_body=json.dumps({"tokens": 0, "result": {"n_shards": 0}}))
    started = time.monotonic()
    assert (await h.get(job["job_id"], wait="60")).json()["status"] == "done"
    assert time.monotonic() - started < 0.5  # an ended harvest has nothing to wait for


@pytest.mark.parametrize("wait", ["61", "60.5", "-1", "abc", "1e3", "", "100"])
async def test_wait_is_0_to_60_seconds(h: Harvests, wait: str) -> None:
    job = await h.created()
    assert_error(await h.get(job["job_id"], wait=wait), 400, "invalid_request", param="wait",
                 message="Invalid value for 'wait': expected a number of seconds from 0 to 60.")


async def test_four_waiting_reads_a_key_and_eight_in_all(h: Harvests) -> None:
    polls = h.stack.services.long_polls
    keys = [h.stack.key, await another_key(h.stack), await another_key(h.stack, same_user=False)]
    jobs = [await h.created(key=key) for key in keys]

    async def wait_read(index: int) -> Any:
        return await h.get(jobs[index]["job_id"], key=keys[index], wait="30")

    waiting = [asyncio.create_task(wait_read(0)) for _ in range(4)]
    while polls.waiting < 4:
        await asyncio.sleep(0.01)
    declined = await h.get(jobs[0]["job_id"], key=keys[0], wait="30")  # the key's fifth
    assert declined.status_code == 200
    assert (declined.headers["x-acs-longpoll"], declined.headers["retry-after"]) == ("declined", "3")
    assert declined.headers["x-acs-harvest-progress"] == "prompts=0/2"
    validate(declined.json(), "HarvestJob")
    assert "x-acs-longpoll" not in (await h.get(jobs[0]["job_id"], key=keys[0])).headers  # no wait: never declined
    waiting += [asyncio.create_task(wait_read(1)) for _ in range(4)]  # another key of the same User
    while polls.waiting < 8:
        await asyncio.sleep(0.01)
    assert (await h.get(jobs[2]["job_id"], key=keys[2], wait="30")).headers["x-acs-longpoll"] == "declined"
    started = time.monotonic()
    for job in jobs[:2]:
        await h.change(job["job_id"], status=WorkStatus.running)
    answers = await asyncio.gather(*waiting)
    assert time.monotonic() - started < 1.0
    assert [a.json()["status"] for a in answers] == ["running"] * 8
    assert all("x-acs-longpoll" not in a.headers for a in answers)
    assert polls.waiting == 0  # every place was freed
    assert "x-acs-longpoll" not in (await h.get(jobs[2]["job_id"], key=keys[2], wait="0.3")).headers


# -- DELETE /v1/harvest/{job_id} -------------------------------------------------------------------------------------


async def test_cancel_a_pending_harvest_costs_nothing_and_a_second_cancel_answers_it_again(h: Harvests) -> None:
    job = await h.created()
    r = await h.delete(job["job_id"])
    assert r.status_code == 200
    cancelled = r.json()
    validate(cancelled, "HarvestJob")
    assert (cancelled["status"], cancelled["tokens"], cancelled["started_at"]) == ("cancelled", 0, None)
    assert ISO.match(cancelled["completed_at"]) and not {"result", "error", "urls_expire_at"} & set(cancelled)
    again = await h.delete(job["job_id"])
    assert (again.status_code, again.json()) == (200, cancelled)
    assert (await h.get(job["job_id"])).json() == cancelled
    (work, _), = await h.rows()
    assert (work.status, work.cancel_requested) == (WorkStatus.cancelled, True)


async def test_cancel_while_running_before_the_gpu_run_started_releases_the_hold(h: Harvests) -> None:
    job = await h.created()
    owner = await principal(h.stack)
    before = await h.month_used(owner.user_id)
    held = await h.run(job["job_id"], gpu_started=False)
    assert await h.month_used(owner.user_id) == before + 20
    cancelled = (await h.delete(job["job_id"])).json()
    assert (cancelled["status"], cancelled["tokens"]) == ("cancelled", 0)
    hold = await h.hold(held.hold_id)
    assert (hold.state, hold.used) == (HoldState.released, 0)
    assert await h.month_used(owner.user_id) == before
    (work, _), = await h.rows()
    assert (work.lease_owner, work.lease_until) == ("", None)  # its Runner sees the row change and stops the run


async def test_cancel_while_running_after_the_gpu_run_started_pays_the_whole_hold(h: Harvests) -> None:
    job = await h.created()
    owner = await principal(h.stack)
    before = await h.month_used(owner.user_id)
    held = await h.run(job["job_id"], gpu_started=True)
    cancelled = (await h.delete(job["job_id"])).json()
    validate(cancelled, "HarvestJob")
    assert (cancelled["status"], cancelled["tokens"], cancelled["reserved_tokens"]) == ("cancelled", 20, 20)
    assert ISO.match(cancelled["started_at"])
    hold = await h.hold(held.hold_id)
    assert (hold.state, hold.used, hold.counting.value, hold.source.value) == (HoldState.settled, 20, "held",
                                                                               "harvest")
    assert await h.month_used(owner.user_id) == before + 20
    assert (await h.delete(job["job_id"])).json() == cancelled  # charged once


async def test_cancel_while_pending_again_after_a_restart_costs_nothing(h: Harvests) -> None:
    job = await h.created()
    await h.change(job["job_id"], status=WorkStatus.queued, started_at=utcnow(), attempts=1,
                   harvest={"gpu_started_at": utcnow()})
    cancelled = (await h.delete(job["job_id"])).json()
    assert (cancelled["status"], cancelled["tokens"]) == ("cancelled", 0)


async def test_a_done_or_failed_harvest_cannot_be_cancelled(h: Harvests) -> None:
    done, failed = await h.created(), await h.created()
    await h.change(done["job_id"], status=WorkStatus.succeeded, finished_at=utcnow(),
                   result_body=json.dumps({"tokens": 3, "result": {"n_shards": 0}}))
    await h.change(failed["job_id"], status=WorkStatus.failed, finished_at=utcnow(),
                   result_body=json.dumps({"tokens": 0, "error": "Inference did not start the harvest."}))
    for job, status in ((done, "done"), (failed, "failed")):
        assert_error(await h.delete(job["job_id"]), 409, "harvest_not_cancellable", type="invalid_request_error",
                     headers={"x-should-retry": "false"}, param=None, message=(
                         f"This harvest is {status}, so it cannot be canceled. Only a pending or running harvest can."))
        assert (await h.get(job["job_id"])).json()["status"] == status


# -- the admin command line -----------------------------------------------------------------------------------------


def _admin(h: Harvests, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    url = h.stack.services.sessions.kw["bind"].url.render_as_string(hide_password=False)
    capsys.readouterr()
    code = run_in_thread(admin.main, list(argv), admin.AdminConfig(database_url=url, clock=h.clock))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


async def test_admin_sets_a_users_harvest_quota(h: Harvests, capsys: pytest.CaptureFixture[str]) -> None:
    async with h.stack.services.sessions() as session:
        name = (await session.get(User, (await principal(h.stack)).user_id)).name
    assert _admin(h, capsys, "user", "harvest-quota", name, "1") == (
        f"Each API key of {name!r} may start 1 harvest a UTC month.\n")
    await h.created()
    await h.change((await h.rows())[0][0].id.__str__(), harvest={"gpu_started_at": utcnow()})
    assert_error(await h.submit(), 429, "harvest_quota_exceeded", message=re.compile(r"started 1 harvests"))
    assert _admin(h, capsys, "user", "harvest-quota", name, "default") == (
        f"Each API key of {name!r} may start the default, 200, harvests a UTC month.\n")
    assert (await h.submit()).status_code == 202


async def test_admin_work_list_shows_a_harvests_progress_and_cancels_it(h: Harvests,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    job = await h.created({**SKY, "prompts": ["a"] * 5})
    await h.change(job["job_id"], harvest={"prompts_done": 2})
    out = _admin(h, capsys, "work", "list")
    lines = [line for line in out.splitlines() if job["job_id"] in line]
    assert len(lines) == 1 and lines[0].rstrip().endswith("prompts=2/5")
    assert out.splitlines()[0].rstrip().endswith("PROGRESS")
    (row,) = [r for r in json.loads(_admin(h, capsys, "work", "list", "--json"))["work"] if r["id"] == job["job_id"]]
    assert (row["kind"], row["progress"]) == ("harvest", {"prompts_done": 2, "n_prompts": 5})
    held = await h.run(job["job_id"], gpu_started=False)
    assert _admin(h, capsys, "work", "cancel", job["job_id"]) == f"{job['job_id']}\tcancelled\n"
    assert (await h.hold(held.hold_id)).state == HoldState.released  # its GPU run had not started
    assert (await h.get(job["job_id"])).json()["tokens"] == 0
