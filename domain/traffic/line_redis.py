"""The per-key line in Redis, shared by every ingress replica.

Per API key, four keys (one hash tag, so they share a Redis Cluster slot):
- `waiting`: sorted set of tickets scored by arrival (INCR of `seq`): FIFO.
- `running`: sorted set of tickets scored by lease expiry (ms, server time).
  A runner renews its lease every `renew_s`; a crashed replica's places come
  back when their leases end, purged by the next script on the key.
- `seen`: sorted set of waiting tickets scored by a short lease that each
  poll renews, so a crashed replica's waiters cannot block the line either.

Every script reads the server's TIME, so replicas' clocks do not matter.
A request that leaves a line with waiters publishes its key (`wakeups`), so
the first waiter moves up at once; waiters also poll, slowly, for what sends
no message: expired leases and dropped waiters.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from typing import Any, AsyncIterator

from domain.errors import QueueFull
from ledger.store.survive import survive
from domain.traffic.line import MAX_RUNNING, MAX_WAITING, LineCounts
from domain.traffic.messages import queue_full
from domain.traffic.wakeups import Wakeups

log = logging.getLogger("acs.traffic")

_PRELUDE = """
local running, waiting, seen, seq = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', running, '-inf', now)
local gone = redis.call('ZRANGEBYSCORE', seen, '-inf', now, 'LIMIT', 0, 256)
if #gone > 0 then
  redis.call('ZREM', waiting, unpack(gone))
  redis.call('ZREM', seen, unpack(gone))
end
"""

# ARGV: ticket, max_running, max_waiting, lease_ms, wait_lease_ms, idle_ttl_ms.
# Returns 1 (runs), 0 (waits), -1 (line full). Joins on the first call,
# polls on the next ones; a ticket already running answers 1, so a retried
# call cannot join twice.
_TRY_START_LUA = _PRELUDE + """
local ticket, max_running, max_waiting = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local lease_ms, wait_lease_ms, ttl_ms = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if redis.call('ZSCORE', running, ticket) then return 1 end
local free = max_running - redis.call('ZCARD', running)
if not redis.call('ZSCORE', waiting, ticket) then
  if redis.call('ZCARD', waiting) - math.max(0, free) >= max_waiting then return -1 end
  redis.call('ZADD', waiting, redis.call('INCR', seq), ticket)
end
local state = 0
if redis.call('ZRANK', waiting, ticket) < free then
  redis.call('ZREM', waiting, ticket)
  redis.call('ZREM', seen, ticket)
  redis.call('ZADD', running, now + lease_ms, ticket)
  state = 1
else
  redis.call('ZADD', seen, now + wait_lease_ms, ticket)
end
for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ttl_ms) end
return state
"""

# ARGV: ticket, lease_ms, idle_ttl_ms. XX: a place that ended stays ended.
# Returns 0 when the ticket was no longer running (its lease had lapsed).
_RENEW_LUA = _PRELUDE + """
local renewed = redis.call('ZADD', running, 'XX', 'CH', now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', running, ARGV[3])
return renewed
"""

# ARGV: ticket, channel, key id. Wherever the ticket is: a cancelled call
# may have started it. Waiters left behind hear of the freed place.
_LEAVE_LUA = """
for i = 1, 3 do redis.call('ZREM', KEYS[i], ARGV[1]) end
if redis.call('ZCARD', KEYS[2]) > 0 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
"""

_COUNTS_LUA = _PRELUDE + """
return {redis.call('ZCARD', running), redis.call('ZCARD', waiting)}
"""


class RedisKeyLine:
    """The line of each API key, in Redis (see the module's docstring)."""

    def __init__(
        self,
        redis_client: Any,
        *,
        max_running: int = MAX_RUNNING,
        max_waiting: int = MAX_WAITING,
        prefix: str = "acs:traffic:line:",
        lease_s: float = 30.0,
        renew_s: float = 10.0,
        wait_lease_s: float = 5.0,
        poll_s: float = 0.25,
        wakeups: bool = True,
    ) -> None:
        """`wakeups=False` polls only (every `poll_s`), for a Redis proxy
        without pub/sub."""
        self.max_running, self.max_waiting = max_running, max_waiting
        self._prefix, self._poll_s, self._renew_s = prefix, poll_s, renew_s
        self._lease_ms, self._wait_lease_ms = int(lease_s * 1000), int(wait_lease_s * 1000)
        self._ttl_ms = 2 * max(self._lease_ms, self._wait_lease_ms)
        self._scripts = {
            name: redis_client.register_script(lua)
            for name, lua in (("try_start", _TRY_START_LUA), ("renew", _RENEW_LUA),
                              ("leave", _LEAVE_LUA), ("counts", _COUNTS_LUA))
        }
        self._wakeups = Wakeups(redis_client, prefix + "freed", listen=wakeups)

    @contextlib.asynccontextmanager
    async def place(self, key_id: str) -> AsyncIterator[None]:
        ticket = uuid.uuid4().hex
        try:
            await self._wait_turn(key_id, ticket)
            renewer = asyncio.create_task(self._renew_forever(key_id, ticket))
        except QueueFull:
            raise  # refused before it joined: nothing to take back
        except BaseException:
            await survive(self._leave(key_id, ticket))
            raise
        try:
            yield
        finally:
            renewer.cancel()
            await survive(self._leave(key_id, ticket, renewer))

    async def aclose(self) -> None:
        await self._wakeups.aclose()

    async def counts(self, key_id: str) -> LineCounts:
        running, waiting = await self._scripts["counts"](keys=self._keys(key_id))
        return LineCounts(int(running), int(waiting))

    def _keys(self, key_id: str) -> list[str]:
        base = f"{self._prefix}{{{key_id}}}:"  # the hash tag keeps one key's line in one slot
        return [base + "running", base + "waiting", base + "seen", base + "seq"]

    async def _wait_turn(self, key_id: str, ticket: str) -> None:
        args = [ticket, self.max_running, self.max_waiting,
                self._lease_ms, self._wait_lease_ms, self._ttl_ms]
        wakeup = self._wakeups.register(key_id, ticket)
        try:
            while True:
                state = int(await self._scripts["try_start"](keys=self._keys(key_id), args=args))
                if state == 1:
                    return
                if state == -1:
                    raise queue_full(self.max_running, self.max_waiting)
                await self._pause(wakeup)
        finally:
            self._wakeups.unregister(key_id, ticket)

    async def _pause(self, wakeup: asyncio.Event) -> None:
        """Until a wake-up or a poll interval; the jitter keeps waiters from
        polling in step."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._poll_s * random.uniform(0.5, 1.25)):
                await wakeup.wait()
        wakeup.clear()

    async def _renew_forever(self, key_id: str, ticket: str) -> None:
        while True:
            await asyncio.sleep(self._renew_s)
            try:
                renewed = await self._scripts["renew"](
                    keys=self._keys(key_id), args=[ticket, self._lease_ms, self._ttl_ms])
                if not renewed:
                    # The request runs on, uncounted: the key may briefly run one more.
                    log.warning("the line lease of key %s lapsed before its renewal", key_id)
            except Exception:  # a Redis hiccup must not end the request; the next try may land
                log.warning("could not renew the line lease of key %s", key_id, exc_info=True)

    async def _leave(self, key_id: str, ticket: str, renewer: asyncio.Task | None = None) -> None:
        if renewer is not None:
            # A renewal in flight must not land after the ticket has gone.
            await asyncio.gather(renewer, return_exceptions=True)
        await self._scripts["leave"](
            keys=self._keys(key_id), args=[ticket, self._wakeups.channel, key_id])
        self._wakeups.wake_first(key_id)  # this replica's own waiters need no message
