"""Traffic limits of the spec's Limits page: rate buckets and the per-key line.

Redis backs them when several ingress replicas share the limits; this
process's memory backs them for the embedded default's one replica.
"""
from api.traffic.buckets import MemoryRateLimiter, RateLimiter, RedisRateLimiter
from api.traffic.limits import BucketPolicy, Traffic, TrafficSettings, traffic_from_settings
from api.traffic.line import KeyLine, LineCounts, MemoryKeyLine
from api.traffic.line_redis import RedisKeyLine

__all__ = [
    "BucketPolicy", "KeyLine", "LineCounts", "MemoryKeyLine", "MemoryRateLimiter",
    "RateLimiter", "RedisKeyLine", "RedisRateLimiter", "Traffic", "TrafficSettings",
    "traffic_from_settings",
]
