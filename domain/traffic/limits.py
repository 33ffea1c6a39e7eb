"""The traffic policies of the spec's Limits page, over buckets and the line.

| Limit (spec, Traffic)                                   | Here                       |
| Requests that start work, per API key: 600 a minute     | check_key(key, "work")     |
| Other requests to /v1, per API key: 600 a minute        | check_key(key, "other")    |
| Missing, wrong or revoked key, per address: 60 a minute | check_address(address)     |
| Completions running 16 / waiting 64, per API key        | line(key)                  |
| Runs, Completions, Jobs, Branches started in the App,   | check_app_user(user)       |
|   per User: 600 a minute                                |                            |

"Work" routes are POST /v1/completions, /v1/completion-jobs, /v1/harvest and
Loom Branches; the caller classifies the route.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncContextManager, Literal

from domain.traffic.buckets import MemoryRateLimiter, RateLimiter, RedisRateLimiter
from domain.traffic.line import MAX_RUNNING, MAX_WAITING, KeyLine, MemoryKeyLine
from domain.traffic.line_redis import RedisKeyLine
from domain.traffic.messages import BucketKind, rate_limited


@dataclass(frozen=True)
class BucketPolicy:
    capacity: int
    refill_per_s: float

    @property
    def per_minute(self) -> int:
        """The number the 429 message names."""
        return round(self.refill_per_s * 60)


@dataclass(frozen=True)
class TrafficSettings:
    # "A full bucket takes a burst of 600 requests, then refills one request
    # every 0.1 seconds."
    key_work: BucketPolicy = BucketPolicy(600, 10.0)
    key_other: BucketPolicy = BucketPolicy(600, 10.0)
    # 60 a minute: a burst of 60, then one a second.
    address: BucketPolicy = BucketPolicy(60, 1.0)
    # What a User starts in the App: 600 a minute, apart from the keys' buckets.
    app_user: BucketPolicy = BucketPolicy(600, 10.0)
    max_running: int = MAX_RUNNING
    max_waiting: int = MAX_WAITING


@dataclass
class Traffic:
    limiter: RateLimiter
    key_line: KeyLine
    settings: TrafficSettings = field(default_factory=TrafficSettings)
    # Closed with the Traffic when it made the client itself.
    redis_client: Any = None

    async def check_key(self, key_id: str, kind: Literal["work", "other"]) -> None:
        """Count one request of an authenticated key; RateLimited past its bucket."""
        policy = self.settings.key_work if kind == "work" else self.settings.key_other
        await self._take(f"key:{key_id}:{kind}", policy, kind)

    async def check_address(self, address: str) -> None:
        """Count one request with a missing, wrong or revoked key from
        `address`; RateLimited past 60 a minute."""
        await self._take(f"addr:{address}", self.settings.address, "address")

    async def check_app_user(self, user_id: str) -> None:
        """Count one piece of work that a User starts in the App (a Playground Run);
        RateLimited past 600 a minute."""
        await self._take(f"user:{user_id}:app", self.settings.app_user, "app")

    def line(self, key_id: str) -> AsyncContextManager[None]:
        """The key's place in the line of POST /v1/completions (QueueFull when full)."""
        return self.key_line.place(key_id)

    async def aclose(self) -> None:
        await self.key_line.aclose()
        if self.redis_client is not None:
            await self.redis_client.aclose()

    async def _take(self, bucket: str, policy: BucketPolicy, kind: BucketKind) -> None:
        wait = await self.limiter.take(
            bucket, capacity=policy.capacity, refill_per_s=policy.refill_per_s
        )
        if wait is not None:
            raise rate_limited(kind, policy.per_minute, wait)


def traffic_from_settings(
    redis_url: str | None, settings: TrafficSettings | None = None
) -> Traffic:
    """Redis when a URL is given (limits shared by all ingress replicas),
    this process's memory otherwise (the embedded default's one replica)."""
    settings = settings or TrafficSettings()
    if not redis_url:
        line = MemoryKeyLine(settings.max_running, settings.max_waiting)
        return Traffic(MemoryRateLimiter(), line, settings)
    import redis.asyncio as aioredis  # only deployments with Redis need the package

    client = aioredis.Redis.from_url(redis_url)
    line = RedisKeyLine(client, max_running=settings.max_running, max_waiting=settings.max_waiting)
    return Traffic(RedisRateLimiter(client), line, settings, redis_client=client)
