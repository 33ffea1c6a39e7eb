"""Publish once a transaction has committed, for a change written inside a transaction that
someone else commits (a Loom Node's end joins the Runner's `queue.finish`).

A subscriber that hears the message reads the ledger: told before the commit, it would read
the state before the change, and wait for its next catch-up. A transaction that rolls back
publishes nothing.
"""
from __future__ import annotations

import asyncio
import logging

from sqlalchemy import event
from sqlmodel.ext.asyncio.session import AsyncSession

from domain.feeds.feed import Feed, Message

log = logging.getLogger("acs.feeds")

# The publishes under way: the event loop keeps only weak references to its tasks.
_under_way: set[asyncio.Task] = set()


def publish_after_commit(session: AsyncSession, feed: Feed, topic: str, message: Message) -> None:
    loop = asyncio.get_running_loop()

    def committed(_session: object) -> None:
        task = loop.create_task(feed.publish(topic, message))
        _under_way.add(task)
        task.add_done_callback(_under_way.discard)

    event.listen(session.sync_session, "after_commit", committed, once=True)

