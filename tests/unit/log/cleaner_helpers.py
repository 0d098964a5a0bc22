"""Helpers for the cleaner tests: keyed batches, compacted logs, reading records back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brokers.common.clock import ManualClock
from brokers.log.cleaner.config import CleanerConfig
from brokers.log.cleaner.log_cleaner import LogCleaner
from brokers.log.config import LogConfig
from brokers.log.log import AppendResult, Log
from brokers.records.batch import DELETE_HORIZON_MASK, BatchHeader, iter_headers
from brokers.records.builder import build_batch, read_batch

KeyValue = tuple[bytes | None, bytes | None]


def compact_config(**overrides: Any) -> LogConfig:
    settings: dict[str, Any] = {
        "cleanup_policy": frozenset({"compact"}),
        "segment_bytes": 1024,
        "index_interval_bytes": 128,
        "delete_retention_ms": 1000,
        "file_delete_delay_ms": 0,
        "min_cleanable_dirty_ratio": 0.5,
    }
    settings.update(overrides)
    return LogConfig(**settings)


def keyed_batch(
    records: Sequence[KeyValue], *, timestamp: int, codec: int = 0, **options: Any
) -> bytes:
    return build_batch(list(records), base_timestamp=timestamp, compression=codec, **options)


def append(log: Log, data: bytes) -> AppendResult:
    return log.append_as_leader(data, list(iter_headers(data)), leader_epoch=0)


def append_records(
    log: Log, clock: ManualClock, records: Sequence[KeyValue], codec: int = 0
) -> AppendResult:
    return append(log, keyed_batch(records, timestamp=clock.time_ms(), codec=codec))


def open_compacted(root: Path, clock: ManualClock, config: LogConfig | None = None) -> Log:
    return Log.open(root / "compacted-0", config or compact_config(), clock=clock)


def new_cleaner(root: Path, clock: ManualClock, **settings: Any) -> LogCleaner:
    settings.setdefault("dedupe_buffer_size", 24 * 10_000)
    cleaner = LogCleaner(root, clock=clock, config=CleanerConfig(**settings))
    cleaner.startup()
    return cleaner


@dataclass(frozen=True)
class StoredRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    horizon: int | None  # the batch's delete horizon (KIP-534), if set


def stored_batches(log: Log, from_offset: int | None = None) -> list[tuple[BatchHeader, bytes]]:
    """Every batch from `from_offset` (default: log start) via `Log.read`, header and bytes."""
    offset = log.log_start_offset if from_offset is None else from_offset
    batches: list[tuple[BatchHeader, bytes]] = []
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        if result.region is None:
            break
        data = result.region.read()
        for position, header in iter_headers(data):
            batches.append((header, data[position : position + header.size]))
        assert result.next_offset > offset
        offset = result.next_offset
    return batches


def records_of(batches: Sequence[tuple[BatchHeader, bytes]]) -> list[StoredRecord]:
    records: list[StoredRecord] = []
    for header, data in batches:
        _, decoded = read_batch(data)
        horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None
        for record in decoded:
            records.append(
                StoredRecord(
                    header.base_offset + record.offset_delta,
                    record.key,
                    record.value,
                    header.base_timestamp + record.timestamp_delta,
                    horizon,
                )
            )
    return records


def read_records(log: Log, from_offset: int | None = None) -> list[StoredRecord]:
    return records_of(stored_batches(log, from_offset))


def values_by_key(records: Sequence[StoredRecord]) -> dict[bytes | None, bytes | None]:
    """The last value each key reads as (what a consumer rebuilding a table ends with)."""
    table: dict[bytes | None, bytes | None] = {}
    for record in records:
        table[record.key] = record.value
    return table


def segment_files(log: Log) -> list[str]:
    return sorted(path.name for path in log.directory.iterdir())
