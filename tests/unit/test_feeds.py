"""The feeds (domain/feeds): what is published on a topic reaches its subscribers, in order, at once;
on both implementations.

Redis runs on 127.0.0.1:6379; without it the Redis cases fail (they do not skip). Pub/sub channels
belong to the whole server, whatever the database number, so each test's feeds use a prefix of
their own, as two platforms on one Redis would.
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Any, AsyncIterator

import anyio
import pytest
import pytest_asyncio
import redis.asyncio as aioredis

from domain.feeds import MISSED, InProcessFeed, RedisFeed, Subscription, feed_of, topic
from domain.feeds.follow import Subscriptions
from tests.waiting import wait_until

REDIS_URL = "redis://127.0.0.1:6379/0"
PROMPT_S = 1.0  # what "at once" allows on a loaded 2-core machine


class Feeds:
    """Feeds of one kind that share their messages: one process's feed, or several processes'
    feeds over one Redis (each its own client: its own connections)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.prefix = f"test:feed:{uuid.uuid4().hex}:"
        self.shared = InProcessFeed()
        self.clients: list[Any] = []
        self.made: list[Any] = []

    def feed(self, client: Any = None) -> Any:
        """Another process's feed (Redis), or the one feed of this process."""
        if self.kind == "memory":
            return self.shared
        if client is None:
            client = aioredis.Redis.from_url(REDIS_URL, client_name=f"acs-test-feed-{uuid.uuid4().hex[:12]}")
            self.clients.append(client)
        made = RedisFeed(client, prefix=self.prefix, rest_s=0.05)
        self.made.append(made)
        return made

    async def close(self) -> None:
        for made in self.made:
            await made.aclose()
        await self.shared.aclose()
        for client in self.clients:
            await client.aclose()


@pytest_asyncio.fixture(params=["memory", "redis"])
async def feeds(request: pytest.FixtureRequest) -> AsyncIterator[Feeds]:
    made = Feeds(request.param)
    yield made
    await made.close()


@pytest_asyncio.fixture
async def redis_feeds() -> AsyncIterator[Feeds]:
    made = Feeds("redis")
    yield made
    await made.close()


async def next_of(subscription: Subscription) -> Any:
    item = await subscription.next(timeout_s=PROMPT_S)
    assert item is not None, f"nothing came on {subscription.topic} within {PROMPT_S} s"
    return item


async def test_a_message_reaches_each_subscriber_of_its_topic_in_order(feeds: Feeds) -> None:
    publisher, listener = feeds.feed(), feeds.feed()
    first, second = await listener.subscribe("loom:a"), await listener.subscribe("loom:a")
    other = await listener.subscribe("loom:b")
    for n in range(5):
        await publisher.publish("loom:a", {"n": n, "text": "é ⏎"})
    for subscription in (first, second):
        assert [await next_of(subscription) for _ in range(5)] == [{"n": n, "text": "é ⏎"} for n in range(5)]
    assert await other.next(timeout_s=0.2) is None  # another topic's messages stay there


async def test_a_subscription_is_live_when_it_is_handed_over(feeds: Feeds) -> None:
    """What is published right after `subscribe` returns is never lost: the subscription is made
    before it returns (with Redis, the channel subscribed and confirmed), not on its first read."""
    publisher, listener = feeds.feed(), feeds.feed()
    for n in range(20):
        subscription = await listener.subscribe(f"run:{n}")
        await publisher.publish(f"run:{n}", {"n": n})
        assert await next_of(subscription) == {"n": n}
        await subscription.aclose()


async def test_what_was_published_before_the_subscription_does_not_come(feeds: Feeds) -> None:
    publisher, listener = feeds.feed(), feeds.feed()
    await publisher.publish("loom:a", {"early": True})
    subscription = await listener.subscribe("loom:a")
    await publisher.publish("loom:a", {"early": False})
    assert await next_of(subscription) == {"early": False}


async def test_each_subscriber_gets_its_own_copy(feeds: Feeds) -> None:
    feed = feeds.feed()
    first, second = await feed.subscribe("loom:a"), await feed.subscribe("loom:a")
    await feed.publish("loom:a", {"text": "a"})
    mine = await next_of(first)
    mine["text"] = "changed"
    assert await next_of(second) == {"text": "a"}


async def test_a_closed_subscription_gets_nothing_and_ends_its_iteration(feeds: Feeds) -> None:
    publisher, listener = feeds.feed(), feeds.feed()
    kept, closed = await listener.subscribe("loom:a"), await listener.subscribe("loom:a")
    await closed.aclose()
    await publisher.publish("loom:a", {"n": 1})
    assert await next_of(kept) == {"n": 1}
    assert await closed.next(timeout_s=0.2) is None
    assert [item async for item in closed] == []


async def test_next_waits_no_longer_than_its_timeout(feeds: Feeds) -> None:
    subscription = await feeds.feed().subscribe("loom:quiet")
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await subscription.next(timeout_s=0.1) is None
    assert 0.09 <= loop.time() - started < 0.5


async def test_a_message_that_is_not_json_fails_at_the_publisher_on_both(feeds: Feeds) -> None:
    """The in-process feed carries JSON text too, so a test on it finds what Redis could not carry."""
    feed = feeds.feed()
    await feed.subscribe("loom:a")
    with pytest.raises(TypeError):
        await feed.publish("loom:a", {"when": object()})


async def test_a_subscriber_far_behind_gets_missed_then_what_came_after() -> None:
    closed: list[Subscription] = []

    async def on_close(subscription: Subscription) -> None:
        closed.append(subscription)

    subscription = Subscription("loom:a", on_close, limit=3)
    for n in range(5):
        subscription.deliver(f'{{"n":{n}}}')  # the fourth finds three waiting: all are dropped
    assert subscription.pending() == [MISSED, {"n": 4}]
    async with subscription:
        pass
    assert closed == [subscription]


def test_the_topic_of_a_thing_names_its_kind() -> None:
    thing = uuid.uuid4()
    assert topic("loom", thing) == f"loom:{thing}" and topic("run", 7) == "run:7"


def test_the_feed_of_a_platform_with_redis_is_redis() -> None:
    assert isinstance(feed_of(None), InProcessFeed)
    client = aioredis.Redis.from_url(REDIS_URL)
    assert isinstance(feed_of(client), RedisFeed)


# -- Redis: across processes, and when Redis fails -------------------------------------------------------

async def subscribers_in_redis(client: Any, channel: str) -> int:
    ((_, count),) = await client.pubsub_numsub(channel)
    return int(count)


async def test_redis_carries_a_message_from_one_process_to_every_other(redis_feeds: Feeds) -> None:
    runner, ingress_a, ingress_b = redis_feeds.feed(), redis_feeds.feed(), redis_feeds.feed()
    a, b = await ingress_a.subscribe("loom:x"), await ingress_b.subscribe("loom:x")
    await runner.publish("loom:x", {"text": "The sky"})
    assert (await next_of(a), await next_of(b)) == ({"text": "The sky"}, {"text": "The sky"})


async def test_redis_one_connection_and_one_channel_a_topic_however_many_subscribe(redis_feeds: Feeds) -> None:
    feed = redis_feeds.feed()
    client = redis_feeds.clients[-1]
    channel = redis_feeds.prefix + "loom:x"
    subscriptions = [await feed.subscribe("loom:x") for _ in range(5)]
    assert await subscribers_in_redis(client, channel) == 1
    for subscription in subscriptions[:4]:
        await subscription.aclose()
    assert await subscribers_in_redis(client, channel) == 1  # one stream still follows it
    await subscriptions[4].aclose()
    async def unsubscribed() -> bool:
        return await subscribers_in_redis(client, channel) == 0

    await wait_until(unsubscribed)
    # A later subscriber of the topic subscribes the channel again, and hears it.
    again = await feed.subscribe("loom:x")
    await redis_feeds.feed().publish("loom:x", {"n": 1})
    assert await next_of(again) == {"n": 1}


async def test_redis_a_broken_connection_says_missed_and_the_feed_subscribes_again(redis_feeds: Feeds) -> None:
    """A stream must not wait on messages that Redis dropped: it hears MISSED, reads its ledger,
    and hears the messages published once its channel is subscribed anew."""
    publisher, listener = redis_feeds.feed(), redis_feeds.feed()
    subscription = await listener.subscribe("loom:x")
    name = (await redis_feeds.clients[-1].client_getname())
    admin = aioredis.Redis.from_url(REDIS_URL)
    try:
        (pubsub_client,) = [c for c in await admin.client_list(_type="pubsub") if c["name"] == name]
        await admin.client_kill_filter(_id=pubsub_client["id"])
    finally:
        await admin.aclose()
    assert await next_of(subscription) is MISSED
    # Until it is subscribed anew a message may be lost: publish until one comes.
    for n in range(100):
        await publisher.publish("loom:x", {"n": n})
        item = await subscription.next(timeout_s=0.05)
        while item is MISSED:  # the second: the channel is subscribed again
            item = await subscription.next(timeout_s=0.05)
        if item is not None:
            assert item["n"] <= n
            return
    raise AssertionError("no message came after the connection broke")


async def test_redis_that_cannot_be_reached_fails_no_publisher_and_no_subscriber() -> None:
    """The Runner's tokens and the streams go on without Redis: the streams catch up from the ledger."""
    client = aioredis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    feed = RedisFeed(client, prefix="test:feed:unreachable:", confirm_s=0.2)
    try:
        await feed.publish("loom:x", {"n": 1})
        loop = asyncio.get_running_loop()
        started = loop.time()
        await feed.publish("loom:x", {"n": 2})  # it rests after a failure: no wait on the next
        assert loop.time() - started < 0.05
        subscription = await feed.subscribe("loom:x")
        assert await subscription.next(timeout_s=0.1) is None
    finally:
        await feed.aclose()
        await client.aclose()


async def test_a_stream_closed_in_a_cancelled_scope_leaves_every_topic_it_followed() -> None:
    """A client that goes away closes its stream's subscriptions inside anyio's cancelled scope,
    where every await that suspends is cancelled again: each topic must still be left."""
    feed = InProcessFeed()
    topics = [topic("run", uuid.uuid4()) for _ in range(3)]
    followed = await Subscriptions.subscribe(feed, topics)
    await feed.publish(topics[1], {"texts": ["a"]})
    assert await followed.next(PROMPT_S) == [{"texts": ["a"]}]
    with anyio.CancelScope() as scope:
        scope.cancel()
        await followed.aclose()
    assert [feed.subscribers(name) for name in topics] == [0, 0, 0]
