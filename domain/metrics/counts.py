"""What a process counts as it works: each HTTP answer with its times, and the tokens of each settled Hold.

One `Counts` per process's services (`cluster/composition.py`): the ingress's middleware
and Settlements, and the Runner's Settlements (Jobs, Loom Nodes) and harvests, add to it.
Without Redis the tally is this process's (`tally.PROCESS_TALLY`); with ACS_REDIS_URL it is
the cluster's (`tally_redis.RedisTally`), so a scrape of any ingress replica shows them all.
"""
from __future__ import annotations

from typing import Any

from prometheus_client.core import Metric

from domain.metrics.series import DURATION, FIRST_BYTE, REQUESTS, TOKENS
from domain.metrics.tally import PROCESS_TALLY, Tally
from domain.metrics.tally_redis import RedisTally


class Counts:
    def __init__(self, tally: Tally) -> None:
        self.tally = tally

    def observe_request(self, method: str, route: str, status: str, model: str,
                        first_byte_s: float | None, duration_s: float) -> None:
        labels = (method, route, status, model)
        self.tally.inc(REQUESTS, labels, 1)
        self.tally.observe(DURATION, labels, duration_s)
        if first_byte_s is not None:
            self.tally.observe(FIRST_BYTE, labels, first_byte_s)

    def count_settled_tokens(self, model: str, source: str, prompt_tokens: int, used: int) -> None:
        """`used` is what the Hold settled to: the prompts and what came after them."""
        self.tally.inc(TOKENS, (model, source, "in"), min(prompt_tokens, used))
        self.tally.inc(TOKENS, (model, source, "out"), max(used - prompt_tokens, 0))

    @property
    def shared(self) -> bool:
        """True when the totals are the cluster's (Redis), not this process's."""
        return isinstance(self.tally, RedisTally)

    async def flush(self) -> None:
        await self.tally.flush()

    async def families(self) -> list[Metric] | None:
        return await self.tally.families()

    async def aclose(self) -> None:
        await self.tally.aclose()


def counts_from_settings(settings: Any, redis_client: Any = None) -> Counts:
    """The cluster's tally over `redis_client` (the traffic's) when there is one, else this process's."""
    if redis_client is None:
        return Counts(PROCESS_TALLY)
    return Counts(RedisTally(redis_client, prefix=settings.metrics_redis_prefix, flush_s=settings.metrics_flush_s,
                             timeout_s=settings.health_timeout_s))
