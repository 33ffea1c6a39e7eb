"""The feed of one process: the embedded default, where the Runner runs beside the routes
(a colocated profile's one replica), and the tests.

Every publisher and subscriber must share this process's event loop, as the routes and a
Runner beside them do. A Runner in another process publishes into its own feed, which no
stream hears: its streams then see its changes only when they catch up from the ledger.
"""
from __future__ import annotations

from domain.feeds.feed import Message, Subscription, encode


class InProcessFeed:
    def __init__(self) -> None:
        self._subscribers: dict[str, set[Subscription]] = {}

    async def publish(self, topic: str, message: Message) -> None:
        data = encode(message)  # also without subscribers: a message that is not JSON raises on both feeds
        subscribers = self._subscribers.get(topic)
        if subscribers:
            for subscription in list(subscribers):
                subscription.deliver(data)

    async def subscribe(self, topic: str) -> Subscription:
        subscription = Subscription(topic, self._leave)
        self._subscribers.setdefault(topic, set()).add(subscription)
        return subscription

    def subscribers(self, topic: str) -> int:
        """How many subscriptions of `topic` are open (a stream that ended left its topic)."""
        return len(self._subscribers.get(topic, ()))

    async def aclose(self) -> None:
        for subscriptions in list(self._subscribers.values()):
            for subscription in list(subscriptions):
                await subscription.aclose()

    async def _leave(self, subscription: Subscription) -> None:
        subscribers = self._subscribers.get(subscription.topic)
        if subscribers is not None:
            subscribers.discard(subscription)
            if not subscribers:
                del self._subscribers[subscription.topic]
