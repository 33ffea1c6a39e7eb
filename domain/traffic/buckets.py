"""Token buckets: the rate limits of the spec's Traffic table.

"Each rate limit is a bucket. A full bucket takes a burst of 600 requests,
then refills one request every 0.1 seconds." A bucket starts full, holds at
most `capacity` tokens, and gains `refill_per_s` tokens a second; each
request takes one.

Two backends with one contract: `RedisRateLimiter` for several ingress
replicas that share the limits, `MemoryRateLimiter` for the embedded default's
single replica.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Protocol


class RateLimiter(Protocol):
    async def take(self, bucket: str, *, capacity: int, refill_per_s: float) -> float | None:
        """Take one token from `bucket`.

        Returns None when the request is admitted (a token was taken), else
        the seconds until one token is available; nothing is taken then. The
        caller answers Retry-After with that wait rounded up, at least 1.
        A bucket not seen before (or expired while idle) is full. `capacity`
        and `refill_per_s` belong to the bucket: pass the same on each call.
        """
        ...


# One round trip, atomic: read, refill, take, write. Time is the server's
# (TIME), so replicas with skewed clocks still share one consistent bucket.
# State: tokens (float) and `at`, the microsecond of the last refill.
_TAKE_LUA = """
local capacity, refill = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(state[1]), tonumber(state[2])
if tokens == nil or at == nil then tokens, at = capacity, now end
tokens = math.min(capacity, tokens + math.max(0, now - at) * refill / 1000000)
if tokens < 1 then
  return tostring((1 - tokens) / refill)
end
tokens = tokens - 1
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', string.format('%.0f', now))
-- Once it would be full again the state says nothing: let an idle bucket go.
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / refill * 1000) + 1000)
return false
"""


class RedisRateLimiter:
    """Buckets in Redis, shared by every replica that uses the same prefix."""

    def __init__(self, redis_client: Any, *, prefix: str = "acs:traffic:bucket:") -> None:
        self._prefix = prefix
        self._take = redis_client.register_script(_TAKE_LUA)

    async def take(self, bucket: str, *, capacity: int, refill_per_s: float) -> float | None:
        wait = await self._take(keys=[self._prefix + bucket], args=[capacity, refill_per_s])
        return None if wait is None else float(wait)


class MemoryRateLimiter:
    """Buckets in this process (one replica). `take` never awaits, so it is
    atomic on the event loop."""

    _SWEEP_EVERY = 4096

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        # bucket -> (tokens, at, full_at): full_at lets a sweep drop idle buckets.
        self._buckets: dict[str, tuple[float, float, float]] = {}
        self._takes = 0

    async def take(self, bucket: str, *, capacity: int, refill_per_s: float) -> float | None:
        now = self._clock()
        tokens, at, _ = self._buckets.get(bucket, (capacity, now, now))
        tokens = min(capacity, tokens + max(0.0, now - at) * refill_per_s)
        if tokens < 1:
            return (1 - tokens) / refill_per_s
        tokens -= 1
        self._buckets[bucket] = (tokens, now, now + (capacity - tokens) / refill_per_s)
        self._sweep(now)
        return None

    def _sweep(self, now: float) -> None:
        """Forget buckets that are full again, as Redis expires them: every
        address that ever sent a bad key would otherwise stay in memory."""
        self._takes += 1
        if self._takes % self._SWEEP_EVERY:
            return
        for name in [name for name, (_, _, full_at) in self._buckets.items() if full_at <= now]:
            del self._buckets[name]
