"""Tiered storage's pure rules: topic settings validated as Kafka's, local retention bounded by
what the remote tier holds, remote retention, metadata records and their folding, and the
remote reader's cut of whole batches."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from brokers.log.config import LogConfig, validate_topic_overrides
from brokers.log.errors import InvalidConfigError
from brokers.log.retention import deletable_segment_count
from brokers.records.builder import simple_batch
from brokers.tiered.config import TieredConfig, TieredConfigError
from brokers.tiered.metadata_manager import PartitionTier
from brokers.tiered.reader import _whole_batches
from brokers.tiered.remote_retention import dangling, expired_segments
from brokers.tiered.segment_metadata import (
    LogStartEvent,
    MetadataDecodeError,
    RemoteSegment,
    SegmentState,
    decode,
    encode,
)

pytestmark = pytest.mark.unit

ON = {"remote.log.storage.system.enable": "true"}


@pytest.mark.parametrize(
    ("overrides", "broker", "name", "message"),
    [
        ({"remote.storage.enable": "true"}, {}, "remote.storage.enable",
         "Tiered Storage functionality is disabled in the broker"),
        ({"remote.storage.enable": "true", "cleanup.policy": "compact"}, ON, "cleanup.policy",
         "Remote log storage only supports topics with cleanup.policy=delete"),
        ({"remote.storage.enable": "true", "local.retention.ms": "-1"}, ON, "local.retention.ms",
         "Value must not be -1 as retention.ms value is set as 604800000."),
        ({"remote.storage.enable": "true", "retention.bytes": "10",
          "local.retention.bytes": "11"}, ON, "local.retention.bytes",
         "Value must not be more than retention.bytes property value: 10"),
        ({"remote.storage.enable": "true", "remote.log.copy.disable": "true",
          "local.retention.ms": "5"}, ON, "local.retention.ms",
         "When `remote.log.copy.disable` is set to true, the `local.retention.ms` and "
         "`retention.ms` must be set to the identical value"),
    ],
)  # fmt: skip
def test_remote_storage_settings_are_refused_as_kafka_refuses_them(
    overrides: dict[str, str], broker: dict[str, str], name: str, message: str
) -> None:
    with pytest.raises(InvalidConfigError) as info:
        validate_topic_overrides(overrides, broker)
    assert info.value.name == name
    assert message in str(info.value)


def test_local_retention_defaults_to_the_total_one() -> None:
    config = LogConfig.from_properties(
        {"remote.storage.enable": "true", "retention.ms": "5000", "retention.bytes": "-1"}, ON
    )
    assert config.remote_storage_enable
    assert config.local_retention_ms_effective == 5000
    assert config.local_retention_bytes_effective == -1
    assert validate_topic_overrides({"remote.storage.enable": "true"}, ON)


@dataclass(frozen=True)
class Seg:
    base_offset: int
    size: int = 100
    largest_timestamp: int = 0


SEGMENTS = [Seg(0), Seg(10), Seg(20), Seg(30)]  # 30 is the active one, log end 35


def count(config: LogConfig, copied_upto: int | None) -> int:
    return deletable_segment_count(
        SEGMENTS, config=config, now_ms=10_000, log_start_offset=0, log_end_offset=35,
        high_watermark=35, by_retention=True, copied_upto=copied_upto,
    )  # fmt: skip


def test_local_retention_deletes_only_what_the_remote_tier_holds() -> None:
    tiered = LogConfig(remote_storage_enable=True, local_retention_ms=1, retention_ms=-1)
    assert count(tiered, None) == 0  # nothing copied: nothing goes, however old
    assert count(tiered, 10) == 1
    assert count(tiered, 25) == 2  # [0, 10) and [10, 20) are wholly copied; [20, 30) is not
    assert count(tiered, 30) == 3
    # Copying disabled: local retention (= the total one) decides alone.
    stopped = LogConfig(remote_storage_enable=True, remote_log_copy_disable=True, retention_ms=1)
    assert count(stopped, None) == 4
    # Without tiering, retention.ms alone decides (every segment is 10 s old).
    assert count(LogConfig(retention_ms=1), None) == 4


def remote(start: int, end: int, *, size: int = 100, ts: int = 0, sid: str = "") -> RemoteSegment:
    return RemoteSegment(
        "t", 0, sid or f"{start:032x}", start, end, ts, size, ((0, start),), 1, 0,
        SegmentState.COPY_SEGMENT_FINISHED,
    )  # fmt: skip


def test_remote_retention_by_time_size_and_log_start() -> None:
    finished = [remote(0, 9, ts=100), remote(10, 19, ts=5_000), remote(20, 29, ts=9_000)]
    config = LogConfig(retention_ms=2_000, retention_bytes=-1)
    by_time = expired_segments(
        finished, config=config, now_ms=10_000, log_start_offset=0, local_only_bytes=0
    )
    assert [s.start_offset for s in by_time] == [0, 10]
    config = LogConfig(retention_ms=-1, retention_bytes=200)
    by_size = expired_segments(
        finished, config=config, now_ms=10_000, log_start_offset=0, local_only_bytes=100
    )
    assert [s.start_offset for s in by_size] == [0, 10]  # 400 bytes in all: 200 too many
    by_start = expired_segments(
        finished, config=LogConfig(retention_ms=-1), now_ms=0, log_start_offset=15,
        local_only_bytes=0,
    )  # fmt: skip
    assert [s.start_offset for s in by_start] == [0]


def test_metadata_records_round_trip_and_fold_forward_only() -> None:
    started = remote(0, 9)
    started = started.with_state(SegmentState.COPY_SEGMENT_STARTED, 5)
    for event in (started, LogStartEvent("t", 0, 7)):
        assert decode(*encode(event)) == event
    with pytest.raises(MetadataDecodeError):
        decode(b"t-0", b'{"v": 99}')
    tier = PartitionTier()
    tier.apply(started)
    assert tier.copied_upto is None and dangling(tier) == [started]
    finished = started.with_state(SegmentState.COPY_SEGMENT_FINISHED, 6)
    tier.apply(finished)
    tier.apply(started)  # read back late: a state never moves backwards
    assert tier.copied_upto == 10 and tier.start_offset == 0
    assert tier.segment_for(9) == finished and tier.segment_for(10) is None
    tier.apply(LogStartEvent("t", 0, 7))
    assert tier.start_offset == 7
    tier.apply(finished.with_state(SegmentState.DELETE_SEGMENT_FINISHED, 7))
    assert tier.copied_upto is None and not tier.segments


def test_the_remote_reader_returns_whole_batches_from_the_fetch_offset() -> None:
    batches = [simple_batch([b"x" * 50] * 5, base_offset=base) for base in (0, 5, 10)]
    data = b"".join(batches)
    size = len(batches[0])
    # Offset 7 lies in the second batch: the first is skipped, two whole batches fit.
    assert _whole_batches(data, 7, 2 * size, True) == (size, 3 * size, 5, 15)
    # Room for less than one batch: one whole batch all the same (KIP-74)...
    assert _whole_batches(data, 0, 10, True) == (0, size, 0, 5)
    # ...unless another partition already returned data.
    assert _whole_batches(data, 0, 10, False)[:2] == (0, 0)
    # The first batch was cut by the ranged read: re-read it whole.
    start, end, first, _ = _whole_batches(data[: size + 70], 5, 10_000, True)
    assert (start, end, first) == (size, 2 * size, 5)
    # Even its header was cut: read again from where it starts.
    assert _whole_batches(data[: size + 10], 5, 10_000, True)[:2] == (size, -1)


def test_broker_settings_name_the_store_and_refuse_unknown_ones(tmp_path: Path) -> None:
    default = TieredConfig.from_properties({}, tmp_path / "data")
    assert not default.enabled and default.store == "LocalTieredStorage"
    assert default.local_dir == tmp_path / "data-remote"
    assert default.copy_max_bytes_per_second is None and default.task_interval_ms == 30_000
    s3 = TieredConfig.from_properties(
        {**ON, "remote.log.storage.manager.class.name": "S3RemoteStorageManager",
         "rsm.config.s3.bucket": "b", "rsm.config.s3.secret.key": "hidden"},
        tmp_path,
    )  # fmt: skip
    assert s3.s3 is not None and s3.s3.bucket == "b" and "hidden" not in repr(s3)
    for bad in (
        {"remote.log.storage.manager.class.name": "com.example.Rsm"},
        {**ON, "remote.log.storage.manager.class.name": "S3RemoteStorageManager"},
        {"remote.log.manager.task.interval.ms": "0"},
    ):
        with pytest.raises(TieredConfigError):
            TieredConfig.from_properties(bad, tmp_path)
