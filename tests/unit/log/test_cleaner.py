"""Compaction rounds over real logs: what is kept, what is removed, where a round stops."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.checkpoints import CLEANER_OFFSET_CHECKPOINT, read_offsets
from brokers.log.cleaner.config import CleanerConfig
from brokers.log.cleaner.log_cleaner import LogCleaner
from brokers.log.log import Log
from brokers.log.log_manager import LogManager
from brokers.records.batch import iter_headers
from tests.unit.log.cleaner_helpers import (
    append,
    append_records,
    compact_config,
    keyed_batch,
    new_cleaner,
    open_compacted,
    read_records,
    records_of,
    stored_batches,
    values_by_key,
)

pytestmark = pytest.mark.unit


def fill(log: Log, clock: ManualClock, rounds: int, keys: int = 5, codec: int = 0) -> None:
    """`rounds` batches, each updating every key once (key i -> b"<round>-<i>")."""
    for n in range(rounds):
        records = [(b"k%d" % i, b"%d-%d" % (n, i)) for i in range(keys)]
        append_records(log, clock, records, codec)


def test_a_round_keeps_the_latest_value_of_every_key_at_its_offset(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    fill(log, clock, 40, codec=3)
    before = read_records(log)
    cleaner = new_cleaner(tmp_path, clock)

    assert cleaner.run([log]) == 1

    after = read_records(log)
    original = {r.offset: r for r in before}
    assert [r.offset for r in after] == sorted(r.offset for r in after)
    assert all(original[r.offset] == r for r in after)  # same offset, key, value, timestamp
    assert values_by_key(after) == values_by_key(before)
    assert len(after) < len(before) / 2
    active = log.active_segment.base_offset
    assert [r for r in before if r.offset >= active] == [r for r in after if r.offset >= active]
    assert cleaner.manager.first_dirty_checkpoint(("compacted", 0)) == active
    assert cleaner.metrics.rounds == 1 and cleaner.metrics.records_removed > 0


def test_the_active_segment_is_never_cleaned(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, compact_config(segment_bytes=1 << 20))
    fill(log, clock, 30)
    before = stored_batches(log)
    cleaner = new_cleaner(tmp_path, clock)

    assert cleaner.run([log]) == 0
    assert cleaner.clean_log(log) is None
    assert stored_batches(log) == before

    log.roll()
    assert cleaner.run([log]) == 1
    assert len(read_records(log)) == 5


def test_records_at_or_past_the_high_watermark_are_untouched(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    fill(log, clock, 40)
    log.roll()
    log.high_watermark = 97  # inside a batch: the round stops before that batch
    before = stored_batches(log)
    cleaner = new_cleaner(tmp_path, clock)

    assert cleaner.run([log]) == 1

    untouched = [b for b in before if b[0].last_offset >= 97]
    assert [b for b in stored_batches(log) if b[0].last_offset >= 97] == untouched
    assert cleaner.manager.first_dirty_checkpoint(("compacted", 0)) == 95
    assert values_by_key(read_records(log)) == values_by_key(records_of(before))


def test_dirty_ratio_picks_the_filthiest_log_and_skips_clean_enough_ones(tmp_path: Path) -> None:
    clock = ManualClock()
    dirty = Log.open(tmp_path / "dirty-0", compact_config(), clock=clock)
    calm = Log.open(tmp_path / "calm-0", compact_config(), clock=clock)
    for log in (dirty, calm):
        fill(log, clock, 40)
        log.roll()
    cleaner = new_cleaner(tmp_path, clock)
    assert cleaner.run([calm, dirty]) == 2  # never cleaned: everything is dirty (ratio 1)
    fill(calm, clock, 1)  # one update per key: the dirty share stays below 0.5
    calm.roll()
    fill(dirty, clock, 30)
    dirty.roll()
    now = clock.time_ms()
    calm_target = cleaner.manager.log_to_clean(calm, now, calm.log_end_offset)
    dirty_target = cleaner.manager.log_to_clean(dirty, now, dirty.log_end_offset)
    assert calm_target.cleanable_ratio < 0.5 < dirty_target.cleanable_ratio
    assert dirty_target.cleanable_ratio == pytest.approx(
        dirty_target.cleanable_bytes / (dirty_target.clean_bytes + dirty_target.cleanable_bytes)
    )
    chosen = cleaner.manager.grab_filthiest([calm, dirty], now, lambda lg: lg.log_end_offset)
    assert chosen is not None and chosen.log is dirty
    assert cleaner.manager.max_dirty_ratio == pytest.approx(dirty_target.cleanable_ratio)
    calm_before = stored_batches(calm)

    assert cleaner.run([calm, dirty]) == 1
    assert stored_batches(calm) == calm_before
    assert cleaner.manager.first_dirty_checkpoint(("dirty", 0)) == dirty.log_end_offset


def test_min_compaction_lag_keeps_recent_segments_uncleaned(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, compact_config(min_compaction_lag_ms=10_000))
    fill(log, clock, 20)
    log.roll()
    old_end = log.log_end_offset
    clock.advance(20_000)
    fill(log, clock, 20)  # younger than the lag
    log.roll()
    before = stored_batches(log)
    cleaner = new_cleaner(tmp_path, clock)

    assert cleaner.run([log]) == 1

    target = cleaner.manager.first_dirty_checkpoint(("compacted", 0))
    assert target is not None and target <= old_end
    young = [b for b in before if b[0].base_offset >= old_end]
    assert [b for b in stored_batches(log) if b[0].base_offset >= old_end] == young
    clock.advance(20_000)
    assert cleaner.run([log]) == 1
    assert len(read_records(log)) == 5


def test_max_compaction_lag_forces_a_clean_below_the_dirty_ratio(tmp_path: Path) -> None:
    clock = ManualClock()
    config = compact_config(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=60_000)
    log = open_compacted(tmp_path, clock, config)
    fill(log, clock, 20)
    log.roll()
    cleaner = new_cleaner(tmp_path, clock)
    assert cleaner.run([log]) == 1  # never cleaned: everything is dirty
    fill(log, clock, 1)
    log.roll()
    assert cleaner.run([log]) == 0  # a little dirt, below 0.99

    clock.advance(61_000)
    target = cleaner.manager.log_to_clean(log, clock.time_ms(), log.log_end_offset)
    assert target.compaction_delay_ms == 1000 and target.cleanable_ratio < 0.99
    assert cleaner.run([log]) == 1


def test_tombstones_stay_for_delete_retention_then_go(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, compact_config(delete_retention_ms=5000))
    fill(log, clock, 10)
    append_records(log, clock, [(b"k1", None), (b"k2", None)], codec=1)
    log.roll()
    cleaner = new_cleaner(tmp_path, clock)
    cleaned_at = clock.time_ms()

    assert cleaner.clean_log(log) is not None
    tombstones = [r for r in read_records(log) if r.value is None]
    assert {r.key for r in tombstones} == {b"k1", b"k2"}
    assert {r.horizon for r in tombstones} == {cleaned_at + 5000}
    assert {r.timestamp for r in tombstones} == {cleaned_at}  # absolute timestamps kept
    assert b"k1" not in {r.key for r in read_records(log) if r.value is not None}

    append_records(log, clock, [(b"k3", b"new")])
    log.roll()
    clock.advance(4999)
    cleaner.clean_log(log)
    assert len([r for r in read_records(log) if r.value is None]) == 2
    clock.advance(1)
    append_records(log, clock, [(b"k4", b"new")])
    log.roll()
    cleaner.clean_log(log)
    assert [r for r in read_records(log) if r.value is None] == []
    assert {r.key for r in read_records(log)} == {b"k0", b"k3", b"k4"}


def test_compact_delete_applies_retention_too(tmp_path: Path) -> None:
    # Segments emptied by cleaning have no timestamp: retention reads their file mtime (Kafka's
    # rule), so the manual clock starts at the real time.
    clock = ManualClock(time_ms=int(time.time() * 1000))
    manager = LogManager(
        tmp_path,
        clock=clock,
        default_config=compact_config(
            cleanup_policy=frozenset({"compact", "delete"}), retention_ms=10_000
        ),
    )
    manager.startup()
    log = manager.create("both", 0)
    fill(log, clock, 20)
    log.roll()
    assert manager.run_cleaner() == 1
    clock.advance(20_000)
    fill(log, clock, 20)
    log.roll()

    assert manager.run_retention() > 0
    assert log.log_start_offset > 0
    assert all(r.offset >= log.log_start_offset for r in read_records(log))
    assert manager.run_cleaner() == 1
    checkpoint = read_offsets(tmp_path / CLEANER_OFFSET_CHECKPOINT)[("both", 0)]
    assert checkpoint == log.active_segment.base_offset
    assert len(read_records(log)) == 5
    manager.shutdown()


def test_cleaner_checkpoint_round_trip_through_the_log_manager(tmp_path: Path) -> None:
    clock = ManualClock()
    manager = LogManager(tmp_path, clock=clock, default_config=compact_config())
    manager.startup()
    log = manager.create("table", 3)
    fill(log, clock, 30)
    log.roll()
    end = log.log_end_offset
    assert manager.run_cleaner() == 1
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text() == f"0\n1\ntable 3 {end}\n"
    manager.shutdown()

    restarted = LogManager(tmp_path, clock=clock, default_config=compact_config())
    restarted.startup()
    assert restarted.cleaner.manager.first_dirty_checkpoint(("table", 3)) == end
    assert restarted.run_cleaner() == 0  # nothing dirty since
    restarted.delete("table", 3)
    assert read_offsets(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {}
    restarted.shutdown()


def test_an_active_producer_keeps_its_last_batch_even_when_emptied(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    producer = {"producer_id": 7, "producer_epoch": 0}
    batch = keyed_batch(
        [(b"k0", b"a"), (b"k1", b"b")], timestamp=clock.time_ms(), base_sequence=0, **producer
    )
    append(log, batch)
    append_records(log, clock, [(b"k0", b"c"), (b"k1", b"d")])
    log.roll()

    new_cleaner(tmp_path, clock).clean_log(log)

    headers = [header for header, _ in stored_batches(log)]
    assert headers[0].producer_id == 7 and headers[0].records_count == 0
    assert (headers[0].base_offset, headers[0].last_offset, headers[0].base_sequence) == (0, 1, 0)
    assert [r.value for r in read_records(log)] == [b"c", b"d"]
    log.close()
    reopened = Log.open(log.directory, log.config, clock=clock, had_clean_shutdown=False)
    entry = reopened.producer_state.last_entry(7)
    assert entry is not None and entry.last_sequence == 1
    reopened.close()


def test_small_segments_are_grouped_into_one_cleaned_segment(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, compact_config(segment_bytes=4096))
    for _ in range(8):
        fill(log, clock, 1)
        log.roll()  # eight tiny segments
    assert len(log.segments) == 9

    new_cleaner(tmp_path, clock).clean_log(log)

    assert [s.base_offset for s in log.segments] == [0, 40]
    assert len(read_records(log)) == 5


def test_a_full_offset_map_cleans_up_to_where_it_filled(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    for n in range(30):  # 20 distinct keys per batch, 600 records
        append_records(log, clock, [(b"key-%d-%d" % (n % 3, i), b"%d" % n) for i in range(20)])
    log.roll()
    expected = values_by_key(read_records(log))
    cleaner = new_cleaner(tmp_path, clock, dedupe_buffer_size=24 * 50)  # 45 keys fit
    rounds = 0
    while cleaner.clean_log(log) is not None:
        rounds += 1
        checkpoint = cleaner.manager.first_dirty_checkpoint(("compacted", 0))
        assert checkpoint is not None and checkpoint % 20 == 0  # a batch boundary
        assert values_by_key(read_records(log)) == expected
    assert rounds > 3
    assert len(read_records(log)) == 60


def test_a_corrupt_batch_marks_the_partition_uncleanable(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    fill(log, clock, 30)
    log.roll()
    path = log.segments[0].records.path
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    path.write_bytes(bytes(data))
    cleaner = new_cleaner(tmp_path, clock)

    assert cleaner.run([log]) == 0
    assert cleaner.manager.uncleanable == {("compacted", 0)}
    assert cleaner.metrics.rounds_failed == 1
    assert cleaner.run([log]) == 0 and cleaner.metrics.rounds_failed == 1
    assert not [p for p in log.directory.iterdir() if p.name.endswith(".cleaned")]


def test_keyless_records_are_refused_on_compacted_topics() -> None:
    from brokers.records.errors import InvalidRecordError
    from brokers.records.validate import validate_for_append

    keyless = keyed_batch([(None, b"v")], timestamp=1_700_000_000_000)
    with pytest.raises(InvalidRecordError):
        validate_for_append(
            keyless, now_ms=1_700_000_000_000, max_message_bytes=1 << 20,
            timestamp_before_max_ms=2**62, timestamp_after_max_ms=2**62, requires_keys=True,
        )  # fmt: skip


def test_keyless_records_already_in_the_log_are_dropped_like_kafka(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    append_records(log, clock, [(None, b"from when the topic was not compacted")])
    fill(log, clock, 30)
    log.roll()
    new_cleaner(tmp_path, clock).clean_log(log)
    records = read_records(log)
    assert None not in {r.key for r in records} and records[0].offset > 0


def test_rebuilt_batches_keep_their_codec(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    for codec in range(5):
        append_records(log, clock, [(b"a", b"old"), (b"c%d" % codec, b"keep-%d" % codec)], codec)
    append_records(log, clock, [(b"a", b"new")])
    log.roll()
    new_cleaner(tmp_path, clock).clean_log(log)
    kept = [(h.compression, h.records_count) for h, _ in stored_batches(log)]
    assert kept == [(0, 1), (1, 1), (2, 1), (3, 1), (4, 1), (0, 1)]
    assert [r.value for r in read_records(log)] == [b"keep-%d" % c for c in range(5)] + [b"new"]
    assert all(len(list(iter_headers(data))) == 1 for _, data in stored_batches(log))


class WorkingClock(ManualClock):
    """Each monotonic reading costs 100 ms: work takes time, so throttle periods end."""

    def monotonic(self) -> float:
        self.advance(100)
        return super().monotonic()


def test_the_io_throttle_paces_a_round(tmp_path: Path) -> None:
    clock = WorkingClock()
    log = open_compacted(tmp_path, clock)
    fill(log, clock, 40)
    log.roll()
    started = clock.monotonic()
    cleaner = LogCleaner(
        tmp_path, clock=clock, sleep=lambda seconds: clock.advance(round(seconds * 1000)),
        config=CleanerConfig(dedupe_buffer_size=24 * 1000, io_max_bytes_per_second=2000),
    )  # fmt: skip

    stats = cleaner.clean_log(log)

    assert stats is not None
    moved = stats.map_bytes_read + stats.bytes_read + stats.bytes_written
    assert moved > 6000
    elapsed = clock.monotonic() - started
    assert elapsed >= (moved - 3000) / 2000  # only the last (partial) period is not paced
    assert cleaner.cleaner.throttler.slept_seconds > 0


def test_bad_records_raise_the_records_error_not_a_crash() -> None:
    from brokers.log.cleaner.batch_filter import record_keys
    from brokers.records.errors import InvalidRecordError

    for payload in (b"\x0a\x00", b"\x02\x00\x00\x00\x02\x61\x01\x00\xff", b"\x80"):
        with pytest.raises(InvalidRecordError):
            record_keys(payload, 1)
