"""Broker settings of tiered storage (Kafka's RemoteLogManagerConfig), read from the broker's
properties.

Owns: `remote.log.storage.system.enable` (off by default, as Kafka), `remote.log.manager.task.
interval.ms` (how often each leader copies and expires, default 30 s), `remote.log.metadata.topic.
num.partitions` (50) and `.replication.factor` (3), `remote.log.index.file.cache.total.size.bytes`
is replaced by a count of cached offset indexes (`remote.log.index.cache.segments`, 64), and the
store: `remote.log.storage.manager.class.name` = `LocalTieredStorage` (default: a directory,
`rsm.config.dir`, default `<log.dir>-remote`) or `S3RemoteStorageManager` (`rsm.config.s3.bucket`,
`.endpoint`, `.region`, `.access.key`, `.secret.key`; `remote.log.manager.copy.max.bytes.per.
second` paces each upload (Kafka's copy quota, KIP-956); Kafka has no S3 manager of its own, the
prefix `rsm.config.` is its `remote.log.storage.manager.impl.prefix`). Bad values raise
TieredConfigError naming the property. Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from brokers.log.config import remote_storage_system_enabled

LOCAL_STORE, S3_STORE = "LocalTieredStorage", "S3RemoteStorageManager"
METADATA_PARTITIONS_MAX = 1000


class TieredConfigError(ValueError):
    """A tiered-storage broker property with a value the broker cannot run with."""


@dataclass(frozen=True, slots=True)
class S3Settings:
    bucket: str
    endpoint: str | None
    region: str
    access_key: str | None
    secret_key: str | None = None  # never logged (repr hides it)

    def __repr__(self) -> str:
        return f"S3Settings(bucket={self.bucket!r}, endpoint={self.endpoint!r})"


@dataclass(frozen=True, slots=True)
class TieredConfig:
    enabled: bool
    task_interval_ms: int
    metadata_partitions: int
    metadata_replication_factor: int
    index_cache_segments: int
    copy_max_bytes_per_second: int | None
    store: str
    local_dir: Path
    s3: S3Settings | None

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], data_dir: Path) -> TieredConfig:
        store = properties.get("remote.log.storage.manager.class.name", LOCAL_STORE).strip()
        if store not in (LOCAL_STORE, S3_STORE):
            raise TieredConfigError(
                f"remote.log.storage.manager.class.name must be {LOCAL_STORE} or {S3_STORE}, "
                f"not {store!r}"
            )
        raw_dir = properties.get("rsm.config.dir", "").strip()
        enabled = remote_storage_system_enabled(properties)
        return cls(
            enabled=enabled,
            task_interval_ms=_int(properties, "remote.log.manager.task.interval.ms", 30_000, 1),
            metadata_partitions=_int(
                properties,
                "remote.log.metadata.topic.num.partitions",
                50,
                1,
                METADATA_PARTITIONS_MAX,
            ),
            metadata_replication_factor=_int(
                properties, "remote.log.metadata.topic.replication.factor", 3, 1
            ),
            index_cache_segments=_int(properties, "remote.log.index.cache.segments", 64, 1),
            copy_max_bytes_per_second=_rate(properties),
            store=store,
            local_dir=Path(raw_dir) if raw_dir else data_dir.with_name(data_dir.name + "-remote"),
            s3=_s3(properties) if enabled and store == S3_STORE else None,
        )


def _s3(properties: Mapping[str, str]) -> S3Settings:
    bucket = properties.get("rsm.config.s3.bucket", "").strip()
    if not bucket:
        raise TieredConfigError("rsm.config.s3.bucket is required with S3RemoteStorageManager")
    return S3Settings(
        bucket=bucket,
        endpoint=properties.get("rsm.config.s3.endpoint", "").strip() or None,
        region=properties.get("rsm.config.s3.region", "us-east-1").strip(),
        access_key=properties.get("rsm.config.s3.access.key", "").strip() or None,
        secret_key=properties.get("rsm.config.s3.secret.key", "").strip() or None,
    )


def _rate(properties: Mapping[str, str]) -> int | None:
    """remote.log.manager.copy.max.bytes.per.second (Kafka's default Long.MAX_VALUE: none)."""
    name = "remote.log.manager.copy.max.bytes.per.second"
    value = _int(properties, name, 2**63 - 1, 1, 2**63 - 1)
    return None if value == 2**63 - 1 else value


def _int(
    properties: Mapping[str, str], name: str, default: int, low: int, high: int = 2**31 - 1
) -> int:
    raw = properties.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise TieredConfigError(f"{name}={raw!r} is not an integer") from None
    if not low <= value <= high:
        raise TieredConfigError(f"{name}={value} must be in [{low}, {high}]")
    return value
