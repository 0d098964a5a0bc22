"""Transaction coordinator settings, read once from broker properties under Kafka's names.

Owns: `TransactionConfig` (immutable). Kafka's defaults: transactions may run at most 15 min
(`transaction.max.timeout.ms`), an id unused for 7 days is forgotten
(`transactional.id.expiration.ms`, checked every hour), timed-out transactions are looked for
every 10 s; `__transaction_state` has 50 partitions of 100 MiB segments, replication factor 3 and
min.insync.replicas 2 (both capped by the brokers there are when it is created standalone).
Partition leaders verify the first transactional batch of a transaction on a partition with the
coordinator (KIP-890 part 1) unless `transaction.partition.verification.enable` is false.
`pier.transaction.version` (default 2; Kafka finalizes the `transaction.version` feature with
`kafka-features`) is the highest transaction version clients are offered: 2 is KIP-890 part 2
(an epoch bump per transaction), which also needs partition verification (the partition leader
adds partitions to the transaction), so it falls back to 1 when verification is off.
Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from brokers.common.config import int_setting
from brokers.coordinator.transactions.errors import TransactionConfigError

DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 7 * DAY_MS
    abort_timed_out_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000
    topic_partitions: int = 50
    topic_replication_factor: int = 3
    topic_min_isr: int = 2
    topic_segment_bytes: int = 100 * 1024 * 1024
    partition_verification_enable: bool = True
    max_transaction_version: int = 2

    @property
    def transaction_version(self) -> int:
        """The `transaction.version` feature level finalized (see the module doc)."""
        if not self.partition_verification_enable:
            return min(self.max_transaction_version, 1)
        return self.max_transaction_version

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> TransactionConfig:
        def read(key: str, default: int, minimum: int) -> int:
            return int_setting(properties, key, default, minimum, TransactionConfigError)

        return cls(
            max_timeout_ms=read("transaction.max.timeout.ms", 900_000, 1),
            id_expiration_ms=read("transactional.id.expiration.ms", 7 * DAY_MS, 1),
            abort_timed_out_interval_ms=read(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000, 1
            ),
            remove_expired_interval_ms=read(
                "transaction.remove.expired.transaction.cleanup.interval.ms", 3_600_000, 1
            ),
            topic_partitions=read("transaction.state.log.num.partitions", 50, 1),
            topic_replication_factor=read("transaction.state.log.replication.factor", 3, 1),
            topic_min_isr=read("transaction.state.log.min.isr", 2, 1),
            topic_segment_bytes=read("transaction.state.log.segment.bytes", 100 * 1024 * 1024, 1),
            partition_verification_enable=_flag(
                properties, "transaction.partition.verification.enable", True
            ),
            max_transaction_version=_level(properties, "pier.transaction.version", 2, 2),
        )


def _level(properties: Mapping[str, str], key: str, default: int, maximum: int) -> int:
    value = int_setting(properties, key, default, 0, TransactionConfigError)
    if value > maximum:
        raise TransactionConfigError(f"{key} must be at most {maximum}, got {value}")
    return value


def _flag(properties: Mapping[str, str], key: str, default: bool) -> bool:
    raw = properties.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise TransactionConfigError(f"{key} must be true or false, got {raw!r}")
    return value == "true"
