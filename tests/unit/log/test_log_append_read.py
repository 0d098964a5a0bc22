from __future__ import annotations

from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.errors import (
    LogClosedError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    UnexpectedAppendOffsetError,
)
from brokers.log.log import Log
from brokers.records.batch import iter_headers
from brokers.records.builder import build_batch, read_batch
from brokers.records.errors import RecordTooLargeError
from tests.unit.log.partition_helpers import append, headers_of, make_batch, open_log, read_all

pytestmark = pytest.mark.unit

SMALL = LogConfig(segment_bytes=1500, index_interval_bytes=128)


def fill(log: Log, clock: ManualClock, count: int, *, step_ms: int = 1) -> list[bytes]:
    bodies = []
    for i in range(count):
        batch = make_batch(1 + i % 4, value=b"%05d" % i * 4, timestamp=clock.time_ms())
        bodies.append(batch[61:])
        append(log, batch)
        clock.advance(step_ms)
    return bodies


def test_offsets_are_assigned_consecutively_and_read_back_across_rolls(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, SMALL)
    expected_first = 0
    for i in range(60):
        result = append(log, make_batch(1 + i % 4, timestamp=clock.time_ms()))
        assert result.first_offset == expected_first
        assert result.last_offset == expected_first + i % 4
        assert result.log_append_time_ms == -1 and not result.duplicate
        expected_first = result.last_offset + 1
    assert log.log_end_offset == expected_first
    assert log.number_of_segments > 5  # rolled by segment.bytes
    assert all(s.size <= SMALL.segment_bytes for s in log.segments)
    bases = [s.base_offset for s in log.segments]
    assert sorted(bases) == bases and bases[0] == 0
    assert sorted(p.name for p in log.directory.glob("*.log")) == [f"{b:020d}.log" for b in bases]


def test_round_trip_keeps_the_producer_bytes(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, SMALL)
    bodies = fill(log, clock, 80)
    stored = read_all(log)
    assert [b.body for b in stored] == bodies
    assert [b.base_offset for b in stored[1:]] == [b.last_offset + 1 for b in stored[:-1]]


def test_read_at_every_offset_returns_the_batch_holding_it(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, SMALL)
    fill(log, clock, 50)
    for offset in range(log.log_end_offset):
        for max_bytes in (1, 300, 5000):
            result = log.read(offset, max_bytes)
            assert result.region is not None
            data = result.region.read()
            headers = [h for _, h in iter_headers(data)]  # only whole batches
            assert headers[0].base_offset <= offset <= headers[0].last_offset
            assert result.first_offset == headers[0].base_offset
            assert result.next_offset == headers[-1].next_offset
            assert len(data) <= max(max_bytes, headers[0].size)


def test_read_honours_max_offset_and_min_one_batch(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, LogConfig())
    for _ in range(10):
        append(log, make_batch(2))
    result = log.read(0, 1 << 20, max_offset=6)
    assert result.region is not None
    assert [h.base_offset for _, h in iter_headers(result.region.read())] == [0, 2, 4]
    assert result.next_offset == 6
    assert log.read(6, 1 << 20, max_offset=6).region is None
    assert log.read(8, 1 << 20, max_offset=6).region is None  # above the high watermark
    assert log.read(0, 10, min_one_batch=False).region is None
    assert log.read(0, 10, min_one_batch=True).region is not None


def test_offset_out_of_range(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, SMALL)
    fill(log, clock, 5)
    end = log.read(log.log_end_offset, 100)
    assert end.region is None and end.first_offset == log.log_end_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_end_offset + 1, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_roll_by_segment_ms(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, LogConfig(segment_ms=1000))
    fill(log, clock, 3, step_ms=400)
    assert log.number_of_segments == 1
    fill(log, clock, 1, step_ms=400)  # 1200 ms after the segment's first batch
    assert log.number_of_segments == 2
    assert log.active_segment.base_offset == 3 + 3


def test_roll_when_the_index_is_full(tmp_path: Path) -> None:
    clock = ManualClock()
    config = LogConfig(segment_index_bytes=3 * 8, index_interval_bytes=0)
    log = open_log(tmp_path, clock, config)
    for _ in range(12):
        append(log, make_batch(1))
    assert log.number_of_segments == 3  # 1 unindexed + 3 indexed batches per segment
    assert [s.base_offset for s in log.segments] == [0, 4, 8]


def test_append_larger_than_a_segment_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock(), LogConfig(segment_bytes=100))
    with pytest.raises(RecordTooLargeError):
        append(log, make_batch(3))
    assert log.log_end_offset == 0 and log.size_bytes == 0


def test_offset_for_timestamp_and_max_timestamp(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    log = open_log(tmp_path, clock, SMALL)
    fill(log, clock, 40, step_ms=10)
    stored = read_all(log)
    for batch in stored:
        found = log.offset_for_timestamp(batch.max_timestamp - 5)
        assert found is not None and (found.offset, found.timestamp) == (
            batch.base_offset,
            batch.max_timestamp,
        )
        assert found.leader_epoch == 0
    assert log.offset_for_timestamp(stored[-1].max_timestamp + 1) is None
    latest = log.max_timestamp_offset()
    assert latest is not None
    assert (latest.offset, latest.timestamp) == (stored[-1].base_offset, stored[-1].max_timestamp)


def test_max_timestamp_picks_the_first_batch_with_the_largest_timestamp(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, LogConfig())
    for ts in (50, 900, 300, 900):
        append(log, make_batch(1, timestamp=ts))
    latest = log.max_timestamp_offset()
    assert latest is not None and (latest.offset, latest.timestamp) == (1, 900)


def test_log_append_time_rewrites_max_timestamp_and_crc(tmp_path: Path) -> None:
    clock = ManualClock(1_800_000_000_000)
    log = open_log(tmp_path, clock, LogConfig(message_timestamp_type="LogAppendTime"))
    result = append(log, make_batch(3, timestamp=5))
    assert result.log_append_time_ms == clock.time_ms() == result.max_timestamp
    region = log.read(0, 1 << 20).region
    assert region is not None
    header, records = read_batch(region.read())  # verifies the recomputed CRC
    assert header.is_log_append_time and header.max_timestamp == clock.time_ms()
    assert len(records) == 3


def test_idempotent_duplicate_returns_the_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock(), LogConfig())
    append(log, make_batch(2))
    first = make_batch(3, producer_id=7, producer_epoch=0, base_sequence=0)
    original = append(log, first)
    assert (original.first_offset, original.last_offset) == (2, 4)
    retry = append(log, first)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (2, 4)
    assert log.log_end_offset == 5
    gap = make_batch(1, producer_id=7, producer_epoch=0, base_sequence=9)
    with pytest.raises(OutOfOrderSequenceError):
        append(log, gap)
    assert log.log_end_offset == 5
    nxt = append(log, make_batch(1, producer_id=7, producer_epoch=0, base_sequence=3))
    assert nxt.first_offset == 5


def test_leader_epoch_cache_follows_appends(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock(), LogConfig())
    append(log, make_batch(2), leader_epoch=1)
    append(log, make_batch(2), leader_epoch=1)
    append(log, make_batch(2), leader_epoch=4)
    assert log.leader_epoch_cache.entries() == [(1, 0), (4, 4)]
    region = log.read(4, 1 << 20).region
    assert region is not None
    assert next(iter_headers(region.read()))[1].partition_leader_epoch == 4


def test_follower_append_keeps_offsets_and_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock(), LogConfig())
    data = build_batch([(b"k", b"v")] * 2, base_offset=0, partition_leader_epoch=2)
    data += build_batch([(b"k", b"v")], base_offset=10, partition_leader_epoch=5)  # a gap
    result = log.append_as_follower(data, headers_of(data))
    assert (result.first_offset, result.last_offset) == (0, 10)
    assert log.log_end_offset == 11
    assert log.leader_epoch_cache.entries() == [(2, 0), (5, 10)]
    region = log.read(0, 1 << 20).region
    assert region is not None and region.read() == data
    with pytest.raises(UnexpectedAppendOffsetError):
        stale = build_batch([(b"k", b"v")], base_offset=10)
        log.append_as_follower(stale, headers_of(stale))


def test_flush_messages_moves_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock(), LogConfig(flush_messages=5))
    append(log, make_batch(3))
    assert log.recovery_point == 0
    append(log, make_batch(3))
    assert log.recovery_point == 6


def test_roll_takes_a_producer_snapshot(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock(), LogConfig())
    append(log, make_batch(2, producer_id=1, producer_epoch=0, base_sequence=0))
    log.roll()
    assert (log.directory / f"{2:020d}.snapshot").exists()
    assert log.number_of_segments == 2
    log.roll()  # the active segment is empty: nothing to roll
    assert log.number_of_segments == 2


def test_truncate_to_removes_later_batches_and_segments(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, SMALL)
    fill(log, clock, 40)
    stored = read_all(log)
    cut = stored[17]
    log.truncate_to(cut.base_offset)
    assert log.log_end_offset == cut.base_offset
    assert read_all(log) == stored[:17]
    assert all(s.base_offset <= cut.base_offset for s in log.segments)
    result = append(log, make_batch(1))
    assert result.first_offset == cut.base_offset
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.number_of_segments) == (500, 500, 1)
    assert append(log, make_batch(1)).first_offset == 500
    assert log.leader_epoch_cache.entries() == [(0, 500)]


def test_closed_log_refuses_use(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock(), LogConfig())
    log.close()
    with pytest.raises(LogClosedError):
        append(log, make_batch(1))
