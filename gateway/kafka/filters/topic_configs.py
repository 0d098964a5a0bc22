"""The topic configs a tenant may set (CreateTopics, AlterConfigs, IncrementalAlterConfigs) and
how config entries are shown to a tenant (CreateTopics v5+, DescribeConfigs).

Owns: the allowlist and its bounds (`refusal`: None, or the error code and message for the first
config a tenant may not set; floors where a small value costs the whole fleet: a file per few
records, a compaction pass rewriting a log for every few bytes written), and hiding the fleet's
broker settings: an entry whose value comes from a broker setting is shown as a default
(DEFAULT_CONFIG) and synonyms naming broker settings are dropped. Pure; runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Iterable

from brokers.wire.errors import ErrorCode
from tenancy.domain import TenantLimits

SEGMENT_BYTES_FLOOR = 2**20  # smaller segments mean a file per few records on the fleet
SEGMENT_MS_FLOOR = 600_000  # likewise for time-based rolls
# Each compaction pass rewrites a log's whole cleaned part, so a dirty ratio r costs the fleet up
# to 1/r bytes rewritten per byte written, and a max lag forces a pass whatever the ratio: at the
# floors, at most 10x the tenant's writes, and one forced pass a partition per 6 hours.
MIN_CLEANABLE_RATIO_FLOOR = 0.1
MAX_COMPACTION_LAG_FLOOR_MS = 6 * 3600 * 1000
# DescribeConfigsResponse.ConfigSource ids
TOPIC_CONFIG, GROUP_CONFIG, DEFAULT_CONFIG = 1, 8, 5
TENANT_SOURCES = frozenset({TOPIC_CONFIG, GROUP_CONFIG, DEFAULT_CONFIG})
ALLOWED = frozenset(
    {
        "cleanup.policy",
        "compression.type",
        "delete.retention.ms",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.ms",
    }
)
Refusal = tuple[ErrorCode, str]


def refusal(configs: Iterable[tuple[str, str | None]], limits: TenantLimits) -> Refusal | None:
    """The first (name, value) a tenant may not set, as (error code, message); None if all may
    be. A null value (a DELETE, or a create the brokers refuse themselves) is checked by name."""
    for name, value in configs:
        if name not in ALLOWED:
            return ErrorCode.policy_violation, (
                f"Config '{name}' cannot be set on this service; allowed: {', '.join(sorted(ALLOWED))}"
            )
        if value is not None:
            problem = _bound(name, value, limits)
            if problem is not None:
                return (
                    ErrorCode.invalid_config,
                    f"Invalid value {value} for config '{name}': {problem}",
                )
    return None


def _bound(name: str, value: str, limits: TenantLimits) -> str | None:
    if name == "min.cleanable.dirty.ratio":
        return _ratio_bound(value)
    floors = {
        "segment.bytes": SEGMENT_BYTES_FLOOR,
        "segment.ms": SEGMENT_MS_FLOOR,
        "max.compaction.lag.ms": MAX_COMPACTION_LAG_FLOOR_MS,
    }
    if name not in floors and name != "max.message.bytes":
        return None  # the brokers validate the rest
    try:
        number = int(value.strip())
    except ValueError:
        return "not an integer"
    if name in floors and number < floors[name]:
        return f"must be at least {floors[name]}"
    if name == "max.message.bytes" and number > limits.max_request_bytes:
        return f"must be at most the tenant's request size limit {limits.max_request_bytes}"
    return None


def _ratio_bound(value: str) -> str | None:
    try:
        ratio = float(value.strip())
    except ValueError:
        return "not a number"
    if not MIN_CLEANABLE_RATIO_FLOOR <= ratio <= 1.0:  # NaN fails both
        return f"must be between {MIN_CLEANABLE_RATIO_FLOOR} and 1"
    return None


def shown_source(source: int) -> int:
    """A broker-level source (static or dynamic broker config) is shown as a default."""
    return source if source in TENANT_SOURCES else DEFAULT_CONFIG
