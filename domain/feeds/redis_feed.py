"""The feed of a cluster: Redis pub/sub, one channel per topic, so that what the Runner's replica
publishes reaches the streams of every ingress replica.

Each process subscribes over one Redis connection however many streams it serves: a
listener hands each message to this process's subscriptions of its channel, a channel is
subscribed while one of them is open, and a subscription is handed over only once Redis
confirmed its channel (SUBSCRIBE's reply), so it misses nothing published after.

What Redis loses is told, never hidden: after the connection broke, each subscription gets
MISSED when it broke and again once its channel is subscribed anew (redis-py subscribes
again when it reconnects), so its stream reads the ledger for what passed meanwhile. A
publish that Redis does not take is lost, and the feed rests for `rest_s` before it tries
again: a Node's tokens never wait on a Redis that is down.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from domain.feeds.feed import Message, Subscription, encode

log = logging.getLogger("acs.feeds")

PREFIX = "acs:feed:"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisFeed:
    """`client` is a redis.asyncio client (the traffic's); `prefix` keeps apart the feeds of two
    platforms on one Redis (pub/sub channels are the server's, whatever the database number)."""

    def __init__(self, client: Any, *, prefix: str = PREFIX, confirm_s: float = 2.0, rest_s: float = 1.0) -> None:
        self._client, self.prefix = client, prefix
        self._confirm_s, self._rest_s = confirm_s, rest_s
        self._pubsub: Any = None
        self._listener: asyncio.Task | None = None
        self._subscribers: dict[str, set[Subscription]] = {}  # by channel: who here wants it
        self._subscribed: set[str] = set()  # the channels that SUBSCRIBE was sent for, and no UNSUBSCRIBE since
        self._unconfirmed: dict[str, int] = {}  # SUBSCRIBE replies still to come, by channel
        self._confirmed: dict[str, asyncio.Event] = {}  # set once Redis confirmed the channel's subscription
        self._commands = asyncio.Lock()  # one SUBSCRIBE or UNSUBSCRIBE at a time: Redis's state follows ours
        self._publish_rests_until = 0.0
        self._closing = False

    # -- publish ----------------------------------------------------------------------------------------

    async def publish(self, topic: str, message: Message) -> None:
        data = encode(message)  # a message that is not JSON is the publisher's own error: it raises
        clock = asyncio.get_running_loop().time
        if clock() < self._publish_rests_until:
            return  # lost: the subscribers catch up from the ledger
        try:
            await self._client.publish(self.prefix + topic, data)
        except Exception:  # noqa: BLE001 - a feed never fails its publisher
            self._publish_rests_until = clock() + self._rest_s
            log.warning("could not publish on %s; its streams catch up from the ledger", topic, exc_info=True)

    # -- subscribe --------------------------------------------------------------------------------------

    async def subscribe(self, topic: str) -> Subscription:
        channel = self.prefix + topic
        subscription = Subscription(topic, self._leave)
        self._subscribers.setdefault(channel, set()).add(subscription)
        confirmed = self._confirmed.get(channel)
        if confirmed is None:
            confirmed = self._confirmed[channel] = asyncio.Event()
            try:
                await self._follow(channel)
            except Exception:  # noqa: BLE001 - the stream still catches up from the ledger
                self._confirmed.pop(channel, None)  # the next subscriber of the channel tries again
                log.warning("could not subscribe to %s; its stream catches up from the ledger", topic, exc_info=True)
                return subscription
        try:
            async with asyncio.timeout(self._confirm_s):
                await confirmed.wait()
        except TimeoutError:
            log.warning("Redis did not confirm the subscription of %s within %s s", topic, self._confirm_s)
        return subscription

    async def _leave(self, subscription: Subscription) -> None:
        channel = self.prefix + subscription.topic
        subscribers = self._subscribers.get(channel)
        if subscribers is None:
            return
        subscribers.discard(subscription)
        if subscribers:
            return
        del self._subscribers[channel]
        self._confirmed.pop(channel, None)
        if self._closing:
            return
        try:
            # Shielded: a stream cancelled as it ends still leaves its channel.
            await asyncio.shield(self._follow(channel))
        except Exception:  # noqa: BLE001
            log.warning("could not unsubscribe from %s", channel, exc_info=True)

    async def _follow(self, channel: str) -> None:
        """Subscribe to the channel in Redis while anyone here wants it, and not after."""
        async with self._commands:
            wanted = channel in self._subscribers
            if wanted and channel not in self._subscribed:
                if self._pubsub is None:
                    self._pubsub = self._client.pubsub()
                self._unconfirmed[channel] = self._unconfirmed.get(channel, 0) + 1
                try:
                    await self._pubsub.subscribe(channel)
                except BaseException:
                    self._unconfirmed[channel] -= 1
                    raise
                self._subscribed.add(channel)
                if self._listener is None or self._listener.done():
                    # Started once the PubSub has its connection: the listener reads from it.
                    self._listener = asyncio.create_task(self._listen())
            elif not wanted and channel in self._subscribed:
                self._subscribed.discard(channel)
                await self._pubsub.unsubscribe(channel)

    # -- the listener -------------------------------------------------------------------------------------

    async def _listen(self) -> None:
        while True:
            try:
                message = await self._pubsub.get_message(timeout=None)
            except Exception:  # noqa: BLE001 - the connection broke: the next read reconnects
                log.warning("the feed's Redis subscription broke; subscribing again", exc_info=True)
                self._miss_all()
                await asyncio.sleep(self._rest_s)
                continue
            if message is not None:
                self._take(message)

    def _take(self, message: dict[str, Any]) -> None:
        kind, channel = message["type"], _text(message["channel"])
        if kind == "message":
            data = _text(message["data"])
            for subscription in list(self._subscribers.get(channel, ())):
                subscription.deliver(data)
        elif kind == "subscribe":
            waiting = self._unconfirmed.get(channel, 0)
            if waiting:
                self._unconfirmed[channel] = waiting - 1
                if waiting == 1:
                    del self._unconfirmed[channel]
                    event = self._confirmed.get(channel)
                    if event is not None:
                        event.set()
            else:
                # Subscribed anew after a reconnect: what was published meanwhile is lost.
                for subscription in list(self._subscribers.get(channel, ())):
                    subscription.miss()

    def _miss_all(self) -> None:
        for subscriptions in list(self._subscribers.values()):
            for subscription in list(subscriptions):
                subscription.miss()

    async def aclose(self) -> None:
        self._closing = True
        for subscriptions in list(self._subscribers.values()):
            for subscription in list(subscriptions):
                await subscription.aclose()
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
            self._listener = None
        if self._pubsub is not None:
            await self._pubsub.aclose()
            self._pubsub = None

