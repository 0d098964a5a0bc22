from __future__ import annotations

from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.errors import OffsetOutOfRangeError
from brokers.log.log import Log
from tests.unit.log.partition_helpers import append, make_batch, open_log, read_all

pytestmark = pytest.mark.unit

HOUR = 3_600_000


def segments_over_time(tmp_path: Path, clock: ManualClock, config: LogConfig) -> Log:
    """Five segments whose batches are one hour apart each, plus an active one."""
    log = open_log(tmp_path, clock, config)
    for _ in range(5):
        for _ in range(3):
            append(log, make_batch(2, timestamp=clock.time_ms()))
        log.roll()
        clock.advance(HOUR)
    append(log, make_batch(2, timestamp=clock.time_ms()))
    return log


def test_retention_ms_deletes_old_segments_and_moves_log_start(tmp_path: Path) -> None:
    clock = ManualClock()
    log = segments_over_time(tmp_path, clock, LogConfig(retention_ms=int(2.5 * HOUR)))
    bases = [s.base_offset for s in log.segments]
    assert log.delete_old_segments() == 3  # ages 5h, 4h, 3h exceed 2.5h
    assert [s.base_offset for s in log.segments] == bases[3:]
    assert log.log_start_offset == bases[3]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert read_all(log)[0].base_offset == bases[3]


def test_retention_ms_rolls_and_deletes_an_expired_active_segment(tmp_path: Path) -> None:
    clock = ManualClock()
    log = segments_over_time(tmp_path, clock, LogConfig(retention_ms=HOUR))
    end = log.log_end_offset
    old_active = log.active_segment.base_offset
    clock.advance(HOUR)  # exactly retention.ms old: kept (Kafka deletes only past it)
    assert log.delete_old_segments() == 5
    assert log.active_segment.base_offset == old_active
    clock.advance(1)
    assert log.delete_old_segments() == 1  # the quiet topic's last data goes too
    assert log.number_of_segments == 1
    assert log.active_segment.base_offset == end and log.active_segment.size == 0
    assert log.log_start_offset == log.log_end_offset == end
    assert read_all(log) == []
    assert (log.directory / f"{old_active:020d}.log.deleted").exists()
    assert log.delete_old_segments() == 0  # an empty active segment is never deleted
    assert log.active_segment.base_offset == end
    append(log, make_batch(2, timestamp=clock.time_ms()))
    assert [b.base_offset for b in read_all(log)] == [end]  # offsets keep counting


def test_expired_active_segment_waits_for_the_high_watermark(tmp_path: Path) -> None:
    clock = ManualClock()
    log = segments_over_time(tmp_path, clock, LogConfig(retention_ms=0))
    clock.advance(10 * HOUR)
    log.high_watermark = log.log_end_offset - 1  # followers lack the last batch
    assert log.delete_old_segments() == 5
    assert log.active_segment.size > 0
    log.high_watermark = log.log_end_offset
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == log.log_end_offset and log.active_segment.size == 0


def test_the_active_segment_survives_every_pass_but_time_and_zero_bytes(tmp_path: Path) -> None:
    clock = ManualClock()
    log = segments_over_time(tmp_path, clock, LogConfig(retention_ms=-1))
    active_size = log.active_segment.size
    log.update_config(LogConfig(retention_ms=-1, retention_bytes=1))
    assert log.delete_old_segments() == 5  # size retention keeps the active segment
    assert log.size_bytes == active_size
    assert log.delete_records_before(log.log_end_offset) == log.log_end_offset
    assert log.number_of_segments == 1 and log.active_segment.size == active_size
    log.update_config(LogConfig(retention_ms=-1, retention_bytes=0))
    assert log.delete_old_segments() == 1  # Kafka's arithmetic: size - 0 covers the active one
    assert log.size_bytes == 0 and log.log_start_offset == log.log_end_offset


def test_retention_bytes_keeps_the_newest_segments_within_the_limit(tmp_path: Path) -> None:
    clock = ManualClock()
    log = segments_over_time(tmp_path, clock, LogConfig(retention_ms=-1))
    sizes = [s.size for s in log.segments]
    limit = sum(sizes[2:]) + 1  # dropping two segments leaves it below; one is not enough
    log.update_config(LogConfig(retention_ms=-1, retention_bytes=limit))
    assert log.delete_old_segments() == 1
    assert log.size_bytes == sum(sizes[1:])
    log.update_config(LogConfig(retention_ms=-1, retention_bytes=sum(sizes[2:])))
    assert log.delete_old_segments() == 1
    assert log.size_bytes == sum(sizes[2:])


def test_compacted_topics_are_not_deleted_by_time_or_size(tmp_path: Path) -> None:
    clock = ManualClock()
    config = LogConfig(retention_ms=0, retention_bytes=0, cleanup_policy=frozenset({"compact"}))
    log = segments_over_time(tmp_path, clock, config)
    assert log.delete_old_segments() == 0


def test_retention_stops_at_the_high_watermark(tmp_path: Path) -> None:
    clock = ManualClock()
    log = segments_over_time(tmp_path, clock, LogConfig(retention_ms=0))
    log.high_watermark = log.segments[2].base_offset
    assert log.delete_old_segments() == 2  # the third holds offsets at the high watermark


def test_deleted_segments_are_renamed_then_removed_after_the_delay(tmp_path: Path) -> None:
    clock = ManualClock()
    log = segments_over_time(tmp_path, clock, LogConfig(retention_ms=0, file_delete_delay_ms=500))
    region = log.read(0, 1 << 20).region
    assert region is not None
    before = region.read()
    assert log.delete_old_segments() == 5
    deleted = sorted(p.name for p in log.directory.glob("*.deleted"))
    assert len(deleted) == 15 and "00000000000000000000.log.deleted" in deleted
    assert region.read() == before  # an in-flight fetch still sends its bytes
    clock.advance(499)
    assert log.delete_expired_segment_files() == 0
    clock.advance(1)
    assert log.delete_expired_segment_files() == 5
    assert not list(log.directory.glob("*.deleted"))


def test_delete_records_before_moves_log_start_and_drops_whole_segments(tmp_path: Path) -> None:
    clock = ManualClock()
    log = segments_over_time(tmp_path, clock, LogConfig())
    bases = [s.base_offset for s in log.segments]
    inside_third = bases[2] + 1
    assert log.delete_records_before(inside_third) == inside_third
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert log.log_start_offset == inside_third
    with pytest.raises(OffsetOutOfRangeError):
        log.read(bases[2], 100)
    result = log.read(inside_third, 1 << 20)
    assert result.first_offset == bases[2]  # the batch holding the new start
    assert log.delete_records_before(1) == inside_third  # never moves back
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(log.log_end_offset + 1)
    log.high_watermark = bases[3]
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(bases[3] + 1)


def test_log_start_offset_survives_reopen_through_the_caller(tmp_path: Path) -> None:
    clock = ManualClock()
    log = segments_over_time(tmp_path, clock, LogConfig())
    log.delete_records_before(3)
    start = log.log_start_offset
    log.close()
    reopened = open_log(
        tmp_path, clock, LogConfig(), log_start_offset=start, had_clean_shutdown=True
    )
    assert reopened.log_start_offset == 3
    assert read_all(reopened)[0].base_offset == 2  # the batch [2, 3] holds offset 3
