"""Group coordinator settings, read once from broker properties under Kafka's names.

Owns: `GroupConfig` (immutable) and its parsing/validation. Kafka defaults: sessions 6 s–30 min,
a 3 s initial rebalance delay, 50 offsets partitions of 100 MiB segments replicated 3 ways (capped
by live brokers), 4 KiB commit metadata, offsets kept 7 days after a group empties, checked every
10 min. KIP-394's 5-minute join timeout for new members is not a Kafka property; it is a field
so tests can shorten it. Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from brokers.common.config import int_setting
from brokers.coordinator.errors import GroupConfigError

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3_000
    max_size: int = INT32_MAX
    new_member_join_timeout_ms: int = 300_000
    offsets_topic_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offset_metadata_max_bytes: int = 4_096
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    # KIP-848 consumer groups (brokers.coordinator.consumer_group).
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_regex_refresh_interval_ms: int = 600_000
    # group.consumer.migration.policy: bidirectional | upgrade | downgrade | disabled
    consumer_migration_policy: str = "bidirectional"

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> GroupConfig:
        def read(key: str, default: int, minimum: int) -> int:
            return _int(properties, key, default, minimum)

        config = cls(
            min_session_timeout_ms=read("group.min.session.timeout.ms", 6_000, 0),
            max_session_timeout_ms=read("group.max.session.timeout.ms", 1_800_000, 0),
            initial_rebalance_delay_ms=read("group.initial.rebalance.delay.ms", 3_000, 0),
            max_size=read("group.max.size", INT32_MAX, 1),
            offsets_topic_partitions=read("offsets.topic.num.partitions", 50, 1),
            offsets_topic_replication_factor=read("offsets.topic.replication.factor", 3, 1),
            offsets_topic_segment_bytes=read("offsets.topic.segment.bytes", 100 * 1024 * 1024, 1),
            offset_metadata_max_bytes=read("offset.metadata.max.bytes", 4_096, 0),
            offsets_retention_ms=read("offsets.retention.minutes", 7 * 24 * 60, 1) * 60_000,
            offsets_retention_check_interval_ms=read(
                "offsets.retention.check.interval.ms", 600_000, 1
            ),
            consumer_session_timeout_ms=read("group.consumer.session.timeout.ms", 45_000, 1),
            consumer_heartbeat_interval_ms=read("group.consumer.heartbeat.interval.ms", 5_000, 1),
            consumer_assignors=_assignors(properties.get("group.consumer.assignors")),
            consumer_regex_refresh_interval_ms=read(
                "group.consumer.regex.refresh.interval.ms", 600_000, 1
            ),
            consumer_migration_policy=_policy(properties.get("group.consumer.migration.policy")),
        )
        if config.min_session_timeout_ms > config.max_session_timeout_ms:
            raise GroupConfigError(
                "group.min.session.timeout.ms must not exceed group.max.session.timeout.ms"
            )
        return config


def _int(properties: Mapping[str, str], key: str, default: int, minimum: int) -> int:
    return int_setting(properties, key, default, minimum, GroupConfigError)


def _assignors(value: str | None) -> tuple[str, ...]:
    """`group.consumer.assignors`: names (the first is the default); only uniform and range."""
    if value is None:
        return ("uniform", "range")
    names = tuple(n.strip().lower() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in ("uniform", "range")]
    if not names or unknown:
        raise GroupConfigError(f"group.consumer.assignors: unknown or empty {unknown or value!r}")
    return names


MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def _policy(value: str | None) -> str:
    """`group.consumer.migration.policy` (Kafka's, case-insensitive); bidirectional by default."""
    policy = (value or "bidirectional").strip().lower()
    if policy not in MIGRATION_POLICIES:
        raise GroupConfigError(f"group.consumer.migration.policy: {value!r} is not one of "
                               f"{', '.join(MIGRATION_POLICIES)}")  # fmt: skip
    return policy
