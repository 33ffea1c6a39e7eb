"""Traffic limits: token buckets and the per-key line, on both backends.

Redis runs on 127.0.0.1:6379; without it the Redis cases fail (they do not
skip). Each test uses its own key prefix and deletes its keys at the end.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
import pytest_asyncio
import redis.asyncio as aioredis

from domain.errors import QueueFull, RateLimited
from domain.traffic import (
    BucketPolicy,
    MemoryKeyLine,
    MemoryRateLimiter,
    RedisKeyLine,
    RedisRateLimiter,
    Traffic,
    TrafficSettings,
    traffic_from_settings,
)
from domain.traffic.messages import queue_full
from tests.waiting import wait_until

REDIS_URL = "redis://127.0.0.1:6379/0"


class Backend:
    """Makes limiters and lines of one backend; Redis ones share a prefix."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.prefix = f"test:traffic:{uuid.uuid4().hex}:"
        self.client = aioredis.Redis.from_url(REDIS_URL) if kind == "redis" else None
        self.lines: list[Any] = []

    def limiter(self) -> Any:
        if self.client is None:
            return MemoryRateLimiter()
        return RedisRateLimiter(self.client, prefix=self.prefix + "bucket:")

    def line(self, max_running: int = 2, max_waiting: int = 3, **redis_options: Any) -> Any:
        if self.client is None:
            return MemoryKeyLine(max_running, max_waiting)
        line = RedisKeyLine(self.client, max_running=max_running, max_waiting=max_waiting,
                            prefix=self.prefix + "line:", **redis_options)
        self.lines.append(line)
        return line

    async def close(self) -> None:
        if self.client is None:
            return
        for line in self.lines:
            await line.aclose()
        keys = [key async for key in self.client.scan_iter(match=self.prefix + "*")]
        if keys:
            await self.client.delete(*keys)
        await self.client.aclose()


@pytest_asyncio.fixture(params=["memory", "redis"])
async def backend(request: pytest.FixtureRequest) -> Any:
    made = Backend(request.param)
    yield made
    await made.close()


@pytest_asyncio.fixture
async def redis_backend() -> Any:
    made = Backend("redis")
    yield made
    await made.close()


class Holders:
    """Tasks that each take a place in a line and keep it until released.

    Every wait is bounded, so a broken line fails its test instead of hanging.
    """

    def __init__(self, line: Any, key: str = "key-1") -> None:
        self.line, self.key = line, key
        self.started: list[int] = []
        self.releases: dict[int, asyncio.Event] = {}
        self.tasks: dict[int, asyncio.Task] = {}

    async def _hold(self, i: int) -> None:
        async with self.line.place(self.key):
            self.started.append(i)
            await self.releases[i].wait()

    async def add(self, i: int) -> asyncio.Task:
        """Start holder `i`, and return once it runs or waits in the line."""
        before = await self.line.counts(self.key)
        self.releases[i] = asyncio.Event()
        self.tasks[i] = asyncio.create_task(self._hold(i))
        await wait_until(lambda: self._counted(before.running + before.waiting + 1))
        return self.tasks[i]

    async def _counted(self, n: int) -> bool:
        counts = await self.line.counts(self.key)
        return counts.running + counts.waiting == n

    async def release(self, i: int) -> None:
        self.releases[i].set()
        await asyncio.wait_for(self.tasks[i], 2.0)

    async def started_count(self, n: int) -> None:
        async def reached() -> bool:
            return len(self.started) >= n

        await wait_until(reached)

    async def close(self) -> None:
        for event in self.releases.values():
            event.set()
        _, stuck = await asyncio.wait(self.tasks.values(), timeout=2.0)
        for task in stuck:
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        assert not stuck, "holders still in the line after their release"


# Buckets --------------------------------------------------------------------------
async def test_bucket_admits_capacity_then_refuses_with_the_wait(backend: Backend) -> None:
    limiter = backend.limiter()
    for _ in range(3):
        assert await limiter.take("b", capacity=3, refill_per_s=2.0) is None
    wait = await limiter.take("b", capacity=3, refill_per_s=2.0)
    assert wait is not None and 0.3 < wait <= 0.5


async def test_bucket_refills_over_time(backend: Backend) -> None:
    limiter = backend.limiter()
    take = lambda: limiter.take("b", capacity=2, refill_per_s=5.0)  # noqa: E731
    assert [await take(), await take()] == [None, None]
    wait = await take()
    assert wait is not None
    await asyncio.sleep(wait + 0.01)  # one token, and a little
    assert await take() is None
    assert await take() is not None  # the next token is ~0.19 s away


async def test_buckets_are_independent(backend: Backend) -> None:
    limiter = backend.limiter()
    assert await limiter.take("a", capacity=1, refill_per_s=0.01) is None
    assert await limiter.take("a", capacity=1, refill_per_s=0.01) is not None
    assert await limiter.take("b", capacity=1, refill_per_s=0.01) is None


async def test_concurrent_takes_admit_exactly_the_capacity(backend: Backend) -> None:
    limiter = backend.limiter()
    waits = await asyncio.gather(
        *(limiter.take("b", capacity=20, refill_per_s=0.001) for _ in range(50))
    )
    assert sum(wait is None for wait in waits) == 20


async def test_memory_buckets_forget_idle_addresses() -> None:
    now = [0.0]
    limiter = MemoryRateLimiter(clock=lambda: now[0])
    for i in range(100):
        await limiter.take(f"addr:{i}", capacity=60, refill_per_s=1.0)
    now[0] = 2.0  # every bucket is full again
    for _ in range(MemoryRateLimiter._SWEEP_EVERY):
        await limiter.take("busy", capacity=10**6, refill_per_s=1.0)
    assert list(limiter._buckets) == ["busy"]


# The line -------------------------------------------------------------------------
async def test_line_runs_at_most_n_at_once(backend: Backend) -> None:
    holders = Holders(backend.line())
    try:
        for i in range(5):
            await holders.add(i)
        assert sorted(holders.started) == [0, 1]
        counts = await holders.line.counts("key-1")
        assert (counts.running, counts.waiting) == (2, 3)
        await holders.release(0)
        await holders.started_count(3)
        assert holders.started == [0, 1, 2]
    finally:
        await holders.close()
    counts = await holders.line.counts("key-1")
    assert (counts.running, counts.waiting) == (0, 0)


async def test_line_keeps_arrival_order(backend: Backend) -> None:
    holders = Holders(backend.line(max_running=2, max_waiting=4))
    try:
        for i in range(6):
            await holders.add(i)
        for i in range(4):
            await holders.release(i)
            await holders.started_count(i + 3)
        assert holders.started == [0, 1, 2, 3, 4, 5]
    finally:
        await holders.close()


async def test_full_line_refuses_with_queue_full(backend: Backend) -> None:
    holders = Holders(backend.line())
    try:
        for i in range(5):
            await holders.add(i)
        with pytest.raises(QueueFull) as refused:
            async with holders.line.place("key-1"):
                pytest.fail("a place in a full line")
        error = refused.value
        assert (error.status, error.type, error.code) == (429, "rate_limit_error", "queue_full")
        assert error.headers() == {"Retry-After": "5"}
        assert error.message == (
            "This API key has 2 Completions running and 3 waiting, the most it may have. "
            "Try again in 5 seconds."
        )
        # Another key has its own line.
        async with holders.line.place("key-2"):
            pass
    finally:
        await holders.close()


async def test_cancelled_waiter_leaves_the_line(backend: Backend) -> None:
    holders = Holders(backend.line())
    try:
        for i in range(5):
            await holders.add(i)
        holders.tasks[3].cancel()  # its client closed the connection

        async def waiting_two() -> bool:
            return (await holders.line.counts("key-1")).waiting == 2

        await wait_until(waiting_two)
        await holders.add(5)  # the freed room takes a newcomer
        for i, started in ((0, 3), (1, 4), (2, 5)):
            await holders.release(i)
            await holders.started_count(started)
        assert holders.started == [0, 1, 2, 4, 5]
    finally:
        await holders.close()


async def test_exception_inside_the_place_frees_it(backend: Backend) -> None:
    line = backend.line(max_running=1)
    with pytest.raises(RuntimeError):
        async with line.place("key-1"):
            raise RuntimeError("the stream broke")
    counts = await line.counts("key-1")
    assert (counts.running, counts.waiting) == (0, 0)
    async with line.place("key-1"):
        assert (await line.counts("key-1")).running == 1


async def test_cancelled_runner_frees_its_place(backend: Backend) -> None:
    holders = Holders(backend.line(max_running=1))
    try:
        await holders.add(0)
        await holders.add(1)
        holders.tasks[0].cancel()  # a stream whose client went away
        await holders.started_count(2)
        assert holders.started == [0, 1]
    finally:
        await holders.close()


# Redis: several replicas ------------------------------------------------------------
async def test_two_replicas_share_one_line(redis_backend: Backend) -> None:
    # A polls too rarely to matter: B's wake-up message moves A's waiter up.
    a, b = Holders(redis_backend.line(poll_s=30)), Holders(redis_backend.line())
    try:
        await a.add(0)
        await b.add(1)
        await a.add(2)
        counts = await b.line.counts("key-1")
        assert (counts.running, counts.waiting) == (2, 1)
        await b.release(1)  # a place freed on B lets A's waiter in
        await a.started_count(2)
        assert a.started == [0, 2]
    finally:
        await a.close()
        await b.close()


async def test_expired_lease_frees_the_place_of_a_crashed_replica(redis_backend: Backend) -> None:
    crashed = redis_backend.line(max_running=1, lease_s=0.3, renew_s=3600)
    held = crashed.place("key-1")
    await held.__aenter__()  # and never renews or exits
    try:
        started = time.monotonic()
        async with asyncio.timeout(3.0), redis_backend.line(max_running=1).place("key-1"):
            assert 0.2 < time.monotonic() - started < 2.0
    finally:
        await held.__aexit__(None, None, None)


async def test_crashed_waiter_stops_blocking_the_line(redis_backend: Backend) -> None:
    live = Holders(redis_backend.line(max_running=1))
    ghost_line = redis_backend.line(max_running=1, wait_lease_s=0.3, poll_s=3600, wakeups=False)
    ghost = Holders(ghost_line)
    try:
        await live.add(0)
        await ghost.add(1)  # first in line, then polls no more
        await live.add(2)
        await live.release(0)
        await live.started_count(2)
        assert live.started == [0, 2] and ghost.started == []
    finally:
        await live.close()
        ghost.tasks[1].cancel()
        await ghost.close()


async def test_renewed_lease_keeps_a_long_place(redis_backend: Backend) -> None:
    holders = Holders(redis_backend.line(max_running=1, lease_s=0.2, renew_s=0.05))
    try:
        await holders.add(0)
        await holders.add(1)
        await asyncio.sleep(0.5)  # more than two leases
        assert holders.started == [0]
    finally:
        await holders.close()


# Policies ---------------------------------------------------------------------------
def small_traffic(backend: Backend) -> Traffic:
    settings = TrafficSettings(
        key_work=BucketPolicy(2, 1.0), key_other=BucketPolicy(1, 1.0),
        address=BucketPolicy(1, 1 / 30),
    )
    return Traffic(backend.limiter(), backend.line(), settings)


async def test_work_and_other_buckets_of_a_key_are_apart(backend: Backend) -> None:
    traffic = small_traffic(backend)
    await traffic.check_key("k", "work")
    await traffic.check_key("k", "work")
    with pytest.raises(RateLimited) as refused:
        await traffic.check_key("k", "work")
    error = refused.value
    assert (error.status, error.type, error.code) == (429, "rate_limit_error", "rate_limited")
    assert error.headers() == {"Retry-After": "1"}
    assert error.message == (
        "This API key sent more than 60 requests that start work in a minute. "
        "Try again in 1 second."
    )
    assert error.body("req_1")["error"] == {
        "message": error.message, "type": "rate_limit_error", "param": None, "code": "rate_limited",
    }
    await traffic.check_key("k", "other")
    with pytest.raises(RateLimited, match="more than 60 other requests to /v1 in a minute"):
        await traffic.check_key("k", "other")
    await traffic.check_key("another key", "work")


async def test_address_limit_names_the_wait(backend: Backend) -> None:
    traffic = small_traffic(backend)
    await traffic.check_address("203.0.113.7")
    with pytest.raises(RateLimited) as refused:
        await traffic.check_address("203.0.113.7")
    assert refused.value.retry_after == 30
    assert refused.value.message == (
        "This address sent more than 2 requests to /v1 with a missing, wrong, or revoked "
        "API key in a minute. Try again in 30 seconds."
    )
    await traffic.check_address("203.0.113.8")


async def test_traffic_line_takes_a_place(backend: Backend) -> None:
    traffic = small_traffic(backend)
    async with traffic.line("k"):
        assert (await traffic.key_line.counts("k")).running == 1


def test_spec_numbers() -> None:
    settings = TrafficSettings()
    assert settings.key_work == settings.key_other == BucketPolicy(600, 10.0)
    assert settings.key_work.per_minute == 600
    assert settings.address == BucketPolicy(60, 1.0) and settings.address.per_minute == 60
    assert (settings.max_running, settings.max_waiting) == (16, 64)
    assert queue_full(16, 64).message == (
        "This API key has 16 Completions running and 64 waiting, the most it may have. "
        "Try again in 5 seconds."
    )


async def test_traffic_from_settings_picks_the_backend() -> None:
    memory = traffic_from_settings(None)
    assert isinstance(memory.limiter, MemoryRateLimiter)
    assert isinstance(memory.key_line, MemoryKeyLine)
    shared = traffic_from_settings(REDIS_URL)
    key = f"test-{uuid.uuid4().hex}"
    try:
        assert isinstance(shared.limiter, RedisRateLimiter)
        assert isinstance(shared.key_line, RedisKeyLine)
        await shared.check_key(key, "work")
        async with shared.line(key):
            assert (await shared.key_line.counts(key)).running == 1
    finally:
        client = shared.redis_client
        await client.delete(*[k async for k in client.scan_iter(match=f"acs:traffic:*{key}*")])
        await shared.aclose()
