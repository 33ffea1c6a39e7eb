"""Push what grows to the streams that follow it (domain/feeds/feed.py): in this process, or
through Redis where the platform has one (ACS_REDIS_URL)."""
from __future__ import annotations

from typing import Any

from domain.feeds.after_commit import publish_after_commit
from domain.feeds.feed import MISSED, Feed, Message, Missed, Subscription, topic
from domain.feeds.memory import InProcessFeed
from domain.feeds.redis_feed import RedisFeed


def feed_of(redis_client: Any = None) -> Feed:
    """Redis's pub/sub over `redis_client` (the traffic's) where there is one, crossing from the
    Runner's replica to every ingress replica; else this process's, where the Runner runs beside
    the routes (the embedded default)."""
    if redis_client is None:
        return InProcessFeed()
    return RedisFeed(redis_client)


__all__ = ["MISSED", "Feed", "InProcessFeed", "Message", "Missed", "RedisFeed", "Subscription", "feed_of",
           "publish_after_commit", "topic"]
