"""GET /v1/looms/{loom_id}/stream (spec: "Follow a Loom as a stream"), in process on SQLite.

No Runner runs here: a Branch's Nodes stay queued, and the tests grow them by
writing their rows and telling the Loom's topic, as a running Node does
(domain/looms/handler.py, domain/looms/news.py). The stream is read as it goes, through a transport that hands each piece of the
body over when the app sends it and tells the app when the client went away
(httpx's own ASGITransport answers only once the app has ended).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any, AsyncIterator

import httpx
import pytest
import redis.asyncio as aioredis
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from api.errors_http import INTERNAL
from domain.feeds import InProcessFeed, RedisFeed
from domain.looms import stream as loom_stream
from domain.looms.news import CHANGED, TextSoFar, loom_topic
from ledger.work import looms
from ledger.store.coltypes import utcnow
from ledger.work.tables import Loom, LoomNode, NodeStatus, Work, WorkStatus
from tests.conftest import new_key
from tests.spec import assert_error, validate
from tests.waiting import wait_until
from tests.unit.test_jobs import jobs  # noqa: F401 - the fixture: the fake stack's own Runners

REDIS_URL = "redis://127.0.0.1:6379/0"
DONE = "[DONE]"
KEEPALIVE = ": keepalive"
BRANCH = {"model": "llama-8b", "max_tokens": 2, "seed": 7}
# Work row states that a Node's own status goes with (a running Node's row is running).
WORK_OF = {NodeStatus.running: WorkStatus.running, NodeStatus.completed: WorkStatus.succeeded,
           NodeStatus.failed: WorkStatus.failed, NodeStatus.cancelled: WorkStatus.cancelled}
LOGPROBS = {"text_offset": [0, 4], "token_logprobs": [-1.5, -0.25], "tokens": [" The", " sky"],
            "top_logprobs": [{" The": -1.5}, {" sky": -0.25}]}


# -- a transport that streams ------------------------------------------------------------------------

class _Body(httpx.AsyncByteStream):
    def __init__(self, pieces: asyncio.Queue, gone: asyncio.Event, app: asyncio.Task) -> None:
        self.pieces, self.gone, self.app = pieces, gone, app

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (piece := await self.pieces.get()) is not None:
            yield piece

    async def aclose(self) -> None:
        self.gone.set()  # the client went away: the app hears http.disconnect
        await asyncio.wait_for(asyncio.shield(self.app), 5)


class LiveASGITransport(httpx.AsyncBaseTransport):
    def __init__(self, app: Any) -> None:
        self.app = app
        self.apps: list[asyncio.Task] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = b"".join([piece async for piece in request.stream])
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
                 "headers": [(k.lower(), v) for k, v in request.headers.raw], "scheme": "http",
                 "path": request.url.path, "raw_path": request.url.raw_path.split(b"?")[0],
                 "query_string": request.url.query, "server": ("api.test", 80), "client": ("127.0.0.1", 1234),
                 "root_path": ""}
        gone, pieces = asyncio.Event(), asyncio.Queue()
        start: asyncio.Future = asyncio.get_running_loop().create_future()
        received = False

        async def receive() -> dict:
            nonlocal received
            if not received:
                received = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            if message["type"] == "http.response.start":
                start.set_result(message)
            elif message["type"] == "http.response.body":
                pieces.put_nowait(message.get("body", b""))
                if not message.get("more_body"):
                    pieces.put_nowait(None)

        app = asyncio.create_task(self.app(scope, receive, send))
        self.apps.append(app)
        await asyncio.wait({start, app}, return_when=asyncio.FIRST_COMPLETED)
        if not start.done():
            app.result()  # raises what the app raised
        message = start.result()
        return httpx.Response(message["status"], headers=message.get("headers", []),
                              stream=_Body(pieces, gone, app))


class Events:
    """A stream's events as they come: each Node event validated against the Node schema.

    A task reads the body into a queue, so a wait for an event that never comes times out and
    fails its test (cancelling a read of the body itself would not end it)."""

    END = object()  # the body ended

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.keepalives = 0
        self._blocks: asyncio.Queue = asyncio.Queue()
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        buffer = ""
        try:
            async for piece in self.response.aiter_text():
                buffer += piece
                while "\n\n" in buffer:
                    block, buffer = buffer.split("\n\n", 1)
                    self._blocks.put_nowait(block)
            assert buffer == "", buffer  # the body ends with a whole event
            self._blocks.put_nowait(self.END)
        except Exception as error:  # noqa: BLE001 - the test's next wait raises it
            self._blocks.put_nowait(error)

    async def _block(self, timeout_s: float) -> Any:
        block = await asyncio.wait_for(self._blocks.get(), timeout_s)
        if isinstance(block, Exception):
            raise block
        return block

    async def next(self, timeout_s: float = 5.0) -> Any:
        """The next event's data: a Node or an error object as JSON, or DONE, within `timeout_s`
        (keepalives do not extend it)."""
        clock = asyncio.get_running_loop().time
        deadline = clock() + timeout_s
        while True:
            block = await self._block(max(deadline - clock(), 0.0))
            assert block is not self.END, "the body ended before the event"
            if block == KEEPALIVE:
                self.keepalives += 1
                continue
            assert block.startswith("data: ") and "\n" not in block, block
            data = block[len("data: "):]
            if data == DONE:
                return DONE
            event = json.loads(data)
            validate(event, "ErrorResponse" if "error" in event and "object" not in event else "Node")
            return event

    async def take(self, count: int) -> list[Any]:
        return [await self.next() for _ in range(count)]

    async def rest(self) -> list[Any]:
        """Every event up to and with DONE; then the body must end."""
        events = []
        while not events or events[-1] != DONE:
            events.append(await self.next())
        assert await self._block(5) is self.END
        return events


# -- the Loom, its Nodes, and their growth as a Runner writes it -------------------------------------

async def make_loom(stack: Any, prompt: str = "The sky is") -> dict:
    r = await stack.http.post("/v1/looms", headers=stack.auth(), json={"prompt": prompt})
    assert r.status_code == 200, r.text
    return r.json()


async def branch(stack: Any, loom: dict, parent_id: str, **fields: Any) -> list[dict]:
    r = await stack.http.post(f"/v1/looms/{loom['id']}/nodes/{parent_id}/branch", headers=stack.auth(),
                              json={**BRANCH, **fields})
    assert r.status_code == 200, r.text
    return r.json()["data"]


async def write_node(stack: Any, node_id: str, status: NodeStatus, text: str, logprobs: dict | None = None, *,
                     attempt: int | None = None, tell: bool = True) -> None:
    """The Node's row as its run writes it, its work row in step (a running Node's row is running),
    and then, as the writers of a Loom do once they committed, the Loom's topic told to read it
    (`tell=False`: a change that no message tells, which the stream's catch-up finds)."""
    async with stack.services.sessions() as session:
        node = await session.get(LoomNode, uuid.UUID(node_id))
        node.status, node.text = status, text
        node.logprobs = None if logprobs is None else json.dumps(logprobs)
        if attempt is not None:
            node.attempt = attempt
        session.add(node)
        if node.work_id is not None:
            work = await session.get(Work, node.work_id)
            work.status = WORK_OF[status]
            session.add(work)
        await session.commit()
        loom_id = node.loom_id
    if tell:
        await stack.services.feed.publish(loom_topic(loom_id), CHANGED)


async def tell_text(stack: Any, loom: dict, node_id: str, text: str, attempt: int = 1) -> None:
    """What the Runner tells as a Node's text grows, before the ledger holds it."""
    await stack.services.feed.publish(loom_topic(uuid.UUID(loom["id"])),
                                      TextSoFar(uuid.UUID(node_id), attempt, text).message())


async def requeue_work(stack: Any, node_id: str) -> None:
    """What a restart does: the Node's work row goes back to queued, the Node's row stays."""
    async with stack.services.sessions() as session:
        node = await session.get(LoomNode, uuid.UUID(node_id))
        work = await session.get(Work, node.work_id)
        work.status = WorkStatus.queued
        session.add(work)
        await session.commit()


async def delete_loom_row(stack: Any, loom_id: str) -> None:
    """A delete that the API would refuse while a Node grows: the stream must still end."""
    async with stack.services.sessions() as session:
        loom = await session.get(Loom, uuid.UUID(loom_id))
        loom.deleted_at = utcnow()
        session.add(loom)
        await session.commit()


async def read_nodes(stack: Any, loom: dict) -> list[dict]:
    r = await stack.http.get(f"/v1/looms/{loom['id']}", headers=stack.auth())
    assert r.status_code == 200, r.text
    return r.json()["nodes"]


class Live:
    """A client whose streams are read as they go (`opened`: each of them)."""

    def __init__(self, stack: Any) -> None:
        self.stack = stack
        self.transport = LiveASGITransport(stack.app)
        self.http = httpx.AsyncClient(transport=self.transport, base_url="http://api.test", timeout=30)
        self.opened: list[Events] = []

    async def open(self, loom: dict, key: str | None = None) -> tuple[httpx.Response, Events]:
        headers = {"Authorization": f"Bearer {key or self.stack.key}"}
        request = self.http.build_request("GET", f"/v1/looms/{loom['id']}/stream", headers=headers)
        response = await self.http.send(request, stream=True)
        events = Events(response)
        self.opened.append(events)
        return response, events

    async def aclose(self) -> None:
        # A stream that a failed test left open goes away too, so that its app ends.
        for events in self.opened:
            events.reader.cancel()
            with contextlib.suppress(BaseException):
                await events.reader
            with contextlib.suppress(Exception):
                await events.response.aclose()
        await self.http.aclose()


@pytest.fixture
async def live(fake_stack: Any) -> AsyncIterator[Live]:
    client = Live(fake_stack)
    yield client
    await client.aclose()


def states(events: list[Any]) -> list[tuple]:
    return [DONE if event == DONE else (event["id"], event["status"], event["text"]) for event in events]


# -- the first events --------------------------------------------------------------------------------

async def test_a_loom_whose_branch_ended_sends_every_node_and_done_at_once(fake_stack):
    loom = await make_loom(fake_stack)
    root = loom["nodes"][0]
    first, second = await branch(fake_stack, loom, root["id"], n=2, logprobs=1)
    await write_node(fake_stack, first["id"], NodeStatus.completed, " The sky", LOGPROBS)
    await write_node(fake_stack, second["id"], NodeStatus.cancelled, " Blue")
    response = await fake_stack.http.get(f"/v1/looms/{loom['id']}/stream", headers=fake_stack.auth())
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.endswith("data: [DONE]\n\n")
    blocks = [block for block in response.text.split("\n\n")[:-1] if block != KEEPALIVE]
    events = [json.loads(block[len("data: "):]) for block in blocks[:-1]]
    for event in events:
        validate(event, "Node")
    # The same objects as a read of the Loom, in its order.
    assert events == await read_nodes(fake_stack, loom)
    assert [e["id"] for e in events] == [root["id"], first["id"], second["id"]]
    assert events[1]["logprobs"] == LOGPROBS


async def test_a_new_loom_is_its_root_and_done(fake_stack, live):
    loom = await make_loom(fake_stack)
    response, events = await live.open(loom)
    assert response.status_code == 200
    assert await events.rest() == [loom["nodes"][0], DONE]


async def test_the_first_events_come_in_the_order_of_a_read(fake_stack, live):
    loom = await make_loom(fake_stack)
    root = loom["nodes"][0]["id"]
    a, b = await branch(fake_stack, loom, root, n=2)
    await write_node(fake_stack, a["id"], NodeStatus.completed, " A")
    await write_node(fake_stack, b["id"], NodeStatus.completed, " B")
    (c,) = await branch(fake_stack, loom, a["id"])  # under the first child: it comes before b
    _, events = await live.open(loom)
    first = await events.take(4)
    assert first == await read_nodes(fake_stack, loom)
    assert [e["id"] for e in first] == [root, a["id"], c["id"], b["id"]]
    assert first[2]["status"] == "queued" and first[2]["request"]["seed"] == 7
    await write_node(fake_stack, c["id"], NodeStatus.completed, " C")
    assert states(await events.rest()) == [(c["id"], "completed", " C"), DONE]


# -- changes ----------------------------------------------------------------------------------------

async def test_a_node_whose_text_grows_is_sent_again_with_its_whole_text(fake_stack, live):
    loom = await make_loom(fake_stack)
    (node,) = await branch(fake_stack, loom, loom["nodes"][0]["id"], logprobs=1)
    _, events = await live.open(loom)
    assert states(await events.take(2))[1] == (node["id"], "queued", "")
    for text in (" The", " The sky"):
        await write_node(fake_stack, node["id"], NodeStatus.running, text)
        assert states([await events.next()]) == [(node["id"], "running", text)]
    await write_node(fake_stack, node["id"], NodeStatus.completed, " The sky", LOGPROBS)
    last, done = await events.rest()
    assert (last["status"], last["text"], last["logprobs"], done) == ("completed", " The sky", LOGPROBS, DONE)
    assert last == (await read_nodes(fake_stack, loom))[1]


async def test_a_node_that_did_not_change_is_not_sent_again(fake_stack, live):
    loom = await make_loom(fake_stack)
    first, second = await branch(fake_stack, loom, loom["nodes"][0]["id"], n=2)
    _, events = await live.open(loom)
    await events.take(3)
    await write_node(fake_stack, first["id"], NodeStatus.running, " A")
    assert states([await events.next()]) == [(first["id"], "running", " A")]
    await asyncio.sleep(0.6)  # a few reads that find nothing new
    await write_node(fake_stack, first["id"], NodeStatus.completed, " A")
    await write_node(fake_stack, second["id"], NodeStatus.failed, "")
    assert states(await events.rest()) == [(first["id"], "completed", " A"), (second["id"], "failed", ""), DONE]


@pytest.mark.settings(stream_catch_up_s=0.25)
async def test_a_node_that_a_restart_put_back_is_sent_queued_without_its_text(fake_stack, live):
    """A restart tells no stream (the Runner puts the row back): the stream's catch-up finds it."""
    loom = await make_loom(fake_stack)
    (node,) = await branch(fake_stack, loom, loom["nodes"][0]["id"])
    await write_node(fake_stack, node["id"], NodeStatus.running, " The")
    _, events = await live.open(loom)
    assert states(await events.take(2))[1] == (node["id"], "running", " The")
    await requeue_work(fake_stack, node["id"])
    assert states([await events.next()]) == [(node["id"], "queued", "")]
    await write_node(fake_stack, node["id"], NodeStatus.completed, " Again")
    assert states(await events.rest()) == [(node["id"], "completed", " Again"), DONE]


async def test_a_branch_that_another_client_starts_is_seen(fake_stack, live):
    loom = await make_loom(fake_stack)
    root = loom["nodes"][0]["id"]
    (mine,) = await branch(fake_stack, loom, root)
    await write_node(fake_stack, mine["id"], NodeStatus.running, " Mine")
    _, events = await live.open(loom)
    await events.take(2)
    other = httpx.AsyncClient(transport=httpx.ASGITransport(app=fake_stack.app), base_url="http://api.test")
    async with other:
        r = await other.post(f"/v1/looms/{loom['id']}/nodes/{root}/branch", headers=fake_stack.auth(),
                             json={**BRANCH, "n": 2, "seed": 100})
    theirs = r.json()["data"]
    new = await events.take(2)
    assert new == theirs  # the same Node objects as their Branch's answer
    await write_node(fake_stack, mine["id"], NodeStatus.completed, " Mine")
    for node in theirs:
        await write_node(fake_stack, node["id"], NodeStatus.completed, " Theirs")
    rest = await events.rest()
    assert sorted(states(rest[:-1])) == sorted([(mine["id"], "completed", " Mine")]
                                               + [(node["id"], "completed", " Theirs") for node in theirs])
    assert rest[-1] == DONE


async def follow_a_node_that_the_runner_grows(stack: Any, live: Live) -> None:
    """The Runner grows a Node on the fake engine (a token each 0.1 s) while the stream follows it:
    the stream catches up only once an hour, so each event is one the Runner told."""
    loom = await make_loom(stack)
    (node,) = await branch(stack, loom, loom["nodes"][0]["id"], max_tokens=12)
    _, events = await live.open(loom)
    sent = [event for event in await events.rest() if event != DONE and event["id"] == node["id"]]
    running = [event["text"] for event in sent if event["status"] == "running"]
    so_far = ["".join(f" t{1000 + i}" for i in range(n)) for n in range(13)]  # "" once it started
    # Each token an event of its own, none missed, from where the stream came in (the Runner may
    # have started the Node before the stream's first read).
    assert running == so_far[so_far.index(running[0]):] and len(running) >= 10
    assert sent[-1]["status"] == "completed"
    assert sent[-1]["text"] == so_far[12]
    assert sent[-1] == (await read_nodes(stack, loom))[1]


@pytest.mark.postgres
@pytest.mark.fake(delay_s=0.1)
@pytest.mark.settings(stream_catch_up_s=3600)
async def test_the_stream_follows_a_node_that_the_runner_grows(fake_stack, jobs, live):
    """In one process: the Runner's feed is the routes' (the embedded default)."""
    jobs.runner()
    await follow_a_node_that_the_runner_grows(fake_stack, live)


@pytest.mark.postgres
@pytest.mark.fake(delay_s=0.1)
@pytest.mark.settings(stream_catch_up_s=3600)
async def test_on_redis_the_stream_hears_a_runner_of_another_process(fake_stack, jobs, live):
    """The Runner's replica and the ingress's, each with its feed over its own Redis connections."""
    prefix = f"test:feed:{uuid.uuid4().hex}:"
    clients = [aioredis.Redis.from_url(REDIS_URL) for _ in range(2)]
    routes_feed, runner_feed = (RedisFeed(client, prefix=prefix) for client in clients)
    fake_stack.replace_services(feed=routes_feed)
    try:
        jobs.runner(feed=runner_feed)
        await follow_a_node_that_the_runner_grows(fake_stack, live)
    finally:
        for runner in jobs.runners:
            await runner.stop()
        for feed in (routes_feed, runner_feed):
            await feed.aclose()
        for client in clients:
            await client.aclose()


async def test_keepalives_while_nothing_changes(fake_stack, live):
    loom = await make_loom(fake_stack)
    (node,) = await branch(fake_stack, loom, loom["nodes"][0]["id"])
    _, events = await live.open(loom)
    await events.take(2)
    await asyncio.sleep(0.9)  # TEST_SETTINGS' keepalive_s is 0.2
    await write_node(fake_stack, node["id"], NodeStatus.completed, " Late")
    assert states(await events.rest()) == [(node["id"], "completed", " Late"), DONE]
    assert events.keepalives >= 3


# -- failures --------------------------------------------------------------------------------------

def fail_reads_after(monkeypatch: pytest.MonkeyPatch, reads: int, error: BaseException) -> list[int]:
    """The Loom's reads fail from read number `reads` + 1 on; counts the reads."""
    calls, read = [], looms.read

    async def failing(session: Any, loom_id: uuid.UUID, user_id: uuid.UUID) -> Any:
        calls.append(1)
        if len(calls) > reads:
            raise error
        return await read(session, loom_id, user_id)

    monkeypatch.setattr(loom_stream.looms, "read", failing)
    return calls


async def error_event(events: Events) -> dict:
    error, done = await events.rest()
    assert done == DONE
    return error


@pytest.mark.settings(stream_catch_up_s=0.25)  # the catch-up reads, and fails
async def test_an_unexpected_read_failure_is_the_500_error_object_then_done(fake_stack, live, monkeypatch):
    loom = await make_loom(fake_stack)
    await branch(fake_stack, loom, loom["nodes"][0]["id"])
    fail_reads_after(monkeypatch, 2, OperationalError("SELECT", {}, Exception("disk I/O error")))
    response, events = await live.open(loom)
    await events.take(2)
    body = await error_event(events)
    request_id = response.headers["x-request-id"]
    assert body == {"error": {"message": INTERNAL, "type": "internal_error", "param": None, "code": "internal_error",
                              "retryable": False, "request_id": request_id}, "request_id": request_id}


@pytest.mark.settings(stream_catch_up_s=0.25)  # the catch-up reads, and fails
async def test_a_mapped_read_failure_is_its_own_error_object(fake_stack, live, monkeypatch):
    loom = await make_loom(fake_stack)
    await branch(fake_stack, loom, loom["nodes"][0]["id"])
    fail_reads_after(monkeypatch, 1, PoolTimeout("QueuePool limit of size 5 overflow 10 reached"))
    response, events = await live.open(loom)
    await events.take(2)
    error = (await error_event(events))["error"]
    assert (error["code"], error["type"], error["request_id"]) == (
        "db_pool_exhausted", "service_unavailable", response.headers["x-request-id"])


@pytest.mark.settings(stream_catch_up_s=0.25)  # the catch-up reads, and fails
async def test_a_loom_deleted_mid_stream_ends_with_its_404_error_object(fake_stack, live):
    loom = await make_loom(fake_stack)
    await branch(fake_stack, loom, loom["nodes"][0]["id"])
    response, events = await live.open(loom)
    await events.take(2)
    await delete_loom_row(fake_stack, loom["id"])
    body = await error_event(events)
    assert body["error"] == {"message": looms.not_found_message(loom["id"]), "type": "invalid_request_error",
                             "param": None, "code": None, "retryable": False,
                             "request_id": response.headers["x-request-id"]}


@pytest.mark.settings(stream_catch_up_s=0.1)
async def test_the_stream_stops_reading_and_leaves_its_topic_when_the_client_goes_away(fake_stack, live,
                                                                                       monkeypatch):
    loom = await make_loom(fake_stack)
    await branch(fake_stack, loom, loom["nodes"][0]["id"])
    reads = fail_reads_after(monkeypatch, 10**6, RuntimeError("never"))
    response, events = await live.open(loom)
    await events.take(2)
    await asyncio.sleep(0.5)
    assert len(reads) >= 2  # it caught up meanwhile
    assert feed_of(fake_stack).subscribers(loom_topic(uuid.UUID(loom["id"]))) == 1
    await response.aclose()  # waits until the app has ended
    assert live.transport.apps[-1].done()
    assert feed_of(fake_stack).subscribers(loom_topic(uuid.UUID(loom["id"]))) == 0
    after_close = len(reads)
    await asyncio.sleep(0.5)
    assert len(reads) == after_close


async def test_a_stream_that_ended_left_its_topic(fake_stack, live):
    loom = await make_loom(fake_stack)
    _, events = await live.open(loom)
    assert await events.rest() == [loom["nodes"][0], DONE]
    assert feed_of(fake_stack).subscribers(loom_topic(uuid.UUID(loom["id"]))) == 0


def feed_of(stack: Any) -> InProcessFeed:
    feed = stack.services.feed
    assert isinstance(feed, InProcessFeed)  # the test stacks have no Redis
    return feed


async def open_counting_reads(stack: Any, live: Live, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict, Events,
                                                                                               list[int]]:
    """A Loom with one queued Node, its stream open past the first events; the reads counted from there
    (the stream's, and the test's own reads through the API)."""
    loom = await make_loom(stack)
    (node,) = await branch(stack, loom, loom["nodes"][0]["id"])
    reads = fail_reads_after(monkeypatch, 10**6, RuntimeError("never"))
    _, events = await live.open(loom)
    await events.take(2)
    reads.clear()
    return loom, node, events, reads


# -- pushed, not polled ------------------------------------------------------------------------------
# With the catch-up an hour away, only what the writers tell moves the stream.

@pytest.mark.settings(stream_catch_up_s=3600)
async def test_a_node_s_text_comes_as_the_runner_tells_it_without_a_read(fake_stack, live, monkeypatch):
    loom, node, events, reads = await open_counting_reads(fake_stack, live, monkeypatch)
    loop = asyncio.get_running_loop()
    for text in ("", " The", " The sky", " The sky is"):
        told = loop.time()
        await tell_text(fake_stack, loom, node["id"], text)
        event = await events.next(timeout_s=2)
        assert (event["id"], event["status"], event["text"]) == (node["id"], "running", text)
        assert loop.time() - told < 0.5
    assert reads == []  # none: the text came in the messages
    # The ledger catches up, and says so: one read, which finds nothing new to send.
    await write_node(fake_stack, node["id"], NodeStatus.running, " The sky is")
    await wait_until(lambda: len(reads) == 1)
    assert (await read_nodes(fake_stack, loom))[1] == event  # as a read of the running Node shows it
    await write_node(fake_stack, node["id"], NodeStatus.completed, " The sky is", LOGPROBS)
    last, done = await events.rest()  # the running Node was not sent again
    assert last == (await read_nodes(fake_stack, loom))[1] and done == DONE


@pytest.mark.settings(stream_catch_up_s=3600)
async def test_a_change_that_is_told_is_read_at_once_and_nothing_else_is_read(fake_stack, live, monkeypatch):
    loom, node, events, reads = await open_counting_reads(fake_stack, live, monkeypatch)
    await asyncio.sleep(1.0)
    assert reads == []  # no poll
    loop = asyncio.get_running_loop()
    told = loop.time()
    await write_node(fake_stack, node["id"], NodeStatus.completed, " Blue")
    assert states(await events.rest()) == [(node["id"], "completed", " Blue"), DONE]
    assert loop.time() - told < 0.5
    assert len(reads) == 1


@pytest.mark.settings(stream_catch_up_s=0.25)
async def test_what_no_message_tells_comes_with_the_catch_up(fake_stack, live, monkeypatch):
    loom, node, events, reads = await open_counting_reads(fake_stack, live, monkeypatch)
    await asyncio.sleep(1.5)
    assert 4 <= len(reads) <= 7  # every 250 ms
    await write_node(fake_stack, node["id"], NodeStatus.completed, " Unsaid", tell=False)
    assert states(await events.rest()) == [(node["id"], "completed", " Unsaid"), DONE]


@pytest.mark.settings(stream_catch_up_s=3600)
async def test_the_ledger_behind_a_told_text_takes_no_text_back(fake_stack, live):
    """The Runner writes a Node's text up to 100 ms after it told it: a read in between holds less."""
    loom = await make_loom(fake_stack)
    (node,) = await branch(fake_stack, loom, loom["nodes"][0]["id"])
    _, events = await live.open(loom)
    await events.take(2)
    await tell_text(fake_stack, loom, node["id"], " The sky")
    assert states([await events.next()]) == [(node["id"], "running", " The sky")]
    await write_node(fake_stack, node["id"], NodeStatus.running, " The", attempt=1)  # read: behind
    await tell_text(fake_stack, loom, node["id"], " The")  # an old message, or a repeated one
    await tell_text(fake_stack, loom, node["id"], " The sky is")
    assert states([await events.next()]) == [(node["id"], "running", " The sky is")]
    await write_node(fake_stack, node["id"], NodeStatus.completed, " The sky is blue")
    assert states(await events.rest()) == [(node["id"], "completed", " The sky is blue"), DONE]


@pytest.mark.settings(stream_catch_up_s=3600)
async def test_a_message_after_the_node_ended_changes_nothing(fake_stack, live):
    loom = await make_loom(fake_stack)
    first, second = await branch(fake_stack, loom, loom["nodes"][0]["id"], n=2)
    _, events = await live.open(loom)
    await events.take(3)
    # A stop: the ledger keeps the text it saved; the Runner's late message comes after.
    await write_node(fake_stack, first["id"], NodeStatus.cancelled, " Sa", attempt=1)
    assert states([await events.next()]) == [(first["id"], "cancelled", " Sa")]
    await tell_text(fake_stack, loom, first["id"], " Saved and more")
    await tell_text(fake_stack, loom, second["id"], " Other")
    assert states([await events.next()]) == [(second["id"], "running", " Other")]  # not the late one
    await write_node(fake_stack, second["id"], NodeStatus.completed, " Other")
    assert states(await events.rest()) == [(second["id"], "completed", " Other"), DONE]


@pytest.mark.settings(stream_catch_up_s=3600)
async def test_a_restart_s_next_attempt_starts_the_text_again_and_the_cut_one_is_not_heard(fake_stack, live):
    loom = await make_loom(fake_stack)
    (node,) = await branch(fake_stack, loom, loom["nodes"][0]["id"])
    await write_node(fake_stack, node["id"], NodeStatus.running, " The", attempt=1)
    _, events = await live.open(loom)
    assert states(await events.take(2))[1] == (node["id"], "running", " The")
    await tell_text(fake_stack, loom, node["id"], " The sky", attempt=1)
    assert states([await events.next()]) == [(node["id"], "running", " The sky")]
    await requeue_work(fake_stack, node["id"])  # reads as queued, without text
    await fake_stack.services.feed.publish(loom_topic(uuid.UUID(loom["id"])), CHANGED)
    assert states([await events.next()]) == [(node["id"], "queued", "")]
    await tell_text(fake_stack, loom, node["id"], " The sky is", attempt=1)  # the cut attempt, late
    await tell_text(fake_stack, loom, node["id"], "", attempt=2)
    assert states([await events.next()]) == [(node["id"], "running", "")]
    await tell_text(fake_stack, loom, node["id"], " A", attempt=2)
    assert states([await events.next()]) == [(node["id"], "running", " A")]
    await write_node(fake_stack, node["id"], NodeStatus.completed, " Again", attempt=2)
    assert states(await events.rest()) == [(node["id"], "completed", " Again"), DONE]


@pytest.mark.settings(stream_catch_up_s=3600)
async def test_a_message_of_a_node_not_read_yet_reads_the_loom(fake_stack, live):
    """Another client's Branch, whose answer the stream did not hear: its first text reads the Loom."""
    loom = await make_loom(fake_stack)
    root = loom["nodes"][0]["id"]
    (mine,) = await branch(fake_stack, loom, root)
    _, events = await live.open(loom)
    await events.take(2)
    untold = fake_stack.services.feed
    fake_stack.replace_services(feed=InProcessFeed())  # the Branch below tells no one this stream hears
    (theirs,) = await branch(fake_stack, loom, root)
    fake_stack.replace_services(feed=untold)
    await write_node(fake_stack, theirs["id"], NodeStatus.running, "", attempt=1, tell=False)
    await tell_text(fake_stack, loom, theirs["id"], " Theirs")
    assert states([await events.next()]) == [(theirs["id"], "running", " Theirs")]  # the read, and the text
    await tell_text(fake_stack, loom, theirs["id"], " Theirs!")
    assert states([await events.next()]) == [(theirs["id"], "running", " Theirs!")]
    await write_node(fake_stack, mine["id"], NodeStatus.completed, " Mine")
    await write_node(fake_stack, theirs["id"], NodeStatus.completed, " Theirs!")
    assert states(await events.rest()) == [(mine["id"], "completed", " Mine"),
                                           (theirs["id"], "completed", " Theirs!"), DONE]


# -- 404 before the stream starts -------------------------------------------------------------------

async def test_another_users_loom_gets_404(fake_stack, live):
    loom = await make_loom(fake_stack)
    other_key = await new_key(fake_stack.services.sessions)
    response = await fake_stack.http.get(f"/v1/looms/{loom['id']}/stream",
                                         headers={"Authorization": f"Bearer {other_key}"})
    assert_error(response, 404, None, message=looms.not_found_message(loom["id"]), type="invalid_request_error")


async def test_a_deleted_or_unknown_loom_gets_404(fake_stack):
    loom = await make_loom(fake_stack)
    r = await fake_stack.http.delete(f"/v1/looms/{loom['id']}", headers=fake_stack.auth())
    assert r.status_code == 200, r.text
    for loom_id in (loom["id"], str(uuid.uuid4())):
        response = await fake_stack.http.get(f"/v1/looms/{loom_id}/stream", headers=fake_stack.auth())
        assert_error(response, 404, None, message=looms.not_found_message(loom_id))


async def test_a_path_id_that_is_not_a_uuid_gets_400(fake_stack):
    response = await fake_stack.http.get("/v1/looms/not-a-uuid/stream", headers=fake_stack.auth())
    assert_error(response, 400, "invalid_request", param="loom_id")


async def test_the_stream_needs_an_api_key(fake_stack):
    loom = await make_loom(fake_stack)
    response = await fake_stack.http.get(f"/v1/looms/{loom['id']}/stream")
    assert_error(response, 401, "missing_authorization")
