"""Traffic limits of the spec's Limits page: rate buckets and the per-key line.

Redis backs them when several ingress replicas share the limits; this
process's memory backs them for the embedded default's one replica.
"""
from domain.traffic.buckets import MemoryRateLimiter, RateLimiter, RedisRateLimiter
from domain.traffic.limits import BucketPolicy, Traffic, TrafficSettings, traffic_from_settings
from domain.traffic.line import KeyLine, LineCounts, MemoryKeyLine
from domain.traffic.line_redis import RedisKeyLine

__all__ = [
    "BucketPolicy", "KeyLine", "LineCounts", "MemoryKeyLine", "MemoryRateLimiter",
    "RateLimiter", "RedisKeyLine", "RedisRateLimiter", "Traffic", "TrafficSettings",
    "traffic_from_settings",
]
