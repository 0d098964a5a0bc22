from __future__ import annotations

from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.log import Log
from brokers.log.segment import LogSegment
from tests.unit.log.partition_helpers import StoredBatch, append, make_batch, open_log, read_all

pytestmark = pytest.mark.unit

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=100)


def build(tmp_path: Path, clock: ManualClock, count: int = 60) -> tuple[Log, list[StoredBatch]]:
    log = open_log(tmp_path, clock, CONFIG)
    for i in range(count):
        append(log, make_batch(1 + i % 3, timestamp=clock.time_ms()))
        clock.advance(5)
    return log, read_all(log)


def crash(log: Log) -> None:
    """Drop the log without the clean close (no final entries, no snapshot, no fsync)."""
    log.release()


def position_of(segment: LogSegment, offset: int) -> int:
    location = segment.translate_offset(offset)
    assert location is not None
    return location.position


def flip(path: Path, position: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[position] ^= 0x40
    path.write_bytes(bytes(raw))


def reopen(tmp_path: Path, clock: ManualClock, *, clean: bool, recovery_point: int = 0) -> Log:
    return open_log(
        tmp_path, clock, CONFIG, had_clean_shutdown=clean, recovery_point=recovery_point
    )


def test_unclean_reopen_of_an_intact_log_keeps_everything(tmp_path: Path) -> None:
    clock = ManualClock()
    log, stored = build(tmp_path, clock)
    crash(log)
    reopened = reopen(tmp_path, clock, clean=False)
    assert read_all(reopened) == stored
    assert reopened.recovery_point == reopened.log_end_offset == stored[-1].last_offset + 1


def test_bit_flip_in_the_active_segment_truncates_there(tmp_path: Path) -> None:
    clock = ManualClock()
    log, stored = build(tmp_path, clock)
    active = log.active_segment
    victim = next(b for b in stored if b.base_offset > active.base_offset + 2)
    flip(active.records.path, position_of(active, victim.base_offset) + 70)
    crash(log)
    reopened = reopen(tmp_path, clock, clean=False)
    kept = [b for b in stored if b.base_offset < victim.base_offset]
    assert read_all(reopened) == kept
    assert reopened.log_end_offset == victim.base_offset
    assert append(reopened, make_batch(1)).first_offset == victim.base_offset


def test_corruption_in_an_older_unflushed_segment_drops_later_segments(tmp_path: Path) -> None:
    clock = ManualClock()
    log, stored = build(tmp_path, clock)
    segments = log.segments
    assert len(segments) >= 4
    middle = segments[1]
    victim = next(b for b in stored if b.base_offset > middle.base_offset)
    flip(middle.records.path, position_of(middle, victim.base_offset) + 65)
    crash(log)
    reopened = reopen(tmp_path, clock, clean=False)
    assert read_all(reopened) == [b for b in stored if b.base_offset < victim.base_offset]
    assert reopened.number_of_segments == 2
    assert not (tmp_path / "topic-0" / f"{segments[3].base_offset:020d}.log").exists()


def test_a_segment_cut_mid_batch_is_truncated_to_whole_batches(tmp_path: Path) -> None:
    clock = ManualClock()
    log, stored = build(tmp_path, clock)
    path = log.active_segment.records.path
    size = path.stat().st_size
    crash(log)
    with path.open("r+b") as f:
        f.truncate(size - 7)
    reopened = reopen(tmp_path, clock, clean=False)
    assert read_all(reopened) == stored[:-1]
    assert reopened.active_segment.size == size - (61 + len(stored[-1].body))


def test_segments_below_the_recovery_point_are_not_rescanned(tmp_path: Path) -> None:
    clock = ManualClock()
    log, stored = build(tmp_path, clock)
    first = log.segments[0]
    flip(first.records.path, 70)  # corrupt, but below the recovery point: trusted
    recovery_point = log.segments[2].base_offset
    crash(log)
    reopened = reopen(tmp_path, clock, clean=False, recovery_point=recovery_point)
    assert reopened.log_end_offset == stored[-1].last_offset + 1


def test_clean_shutdown_skips_the_full_scan(tmp_path: Path) -> None:
    clock = ManualClock()
    log, stored = build(tmp_path, clock)
    active = log.active_segment
    path = active.records.path
    victim = next(b for b in stored if b.base_offset > active.base_offset + 2)
    inside_records = position_of(active, victim.base_offset) + 70
    log.close()
    flip(path, inside_records)  # a scan would find this; a clean start must not look
    reopened = reopen(tmp_path, clock, clean=True, recovery_point=stored[-1].last_offset + 1)
    assert reopened.log_end_offset == stored[-1].last_offset + 1
    assert reopened.active_segment.size == path.stat().st_size
    crash(reopened)
    scanned = reopen(tmp_path, clock, clean=False, recovery_point=0)  # the scan does find it
    assert scanned.log_end_offset < stored[-1].last_offset + 1


@pytest.mark.parametrize("damage", ["delete", "partial_entry", "garbage"])
def test_missing_or_corrupt_index_is_rebuilt_after_clean_shutdown(
    tmp_path: Path, damage: str
) -> None:
    clock = ManualClock()
    log, stored = build(tmp_path, clock)
    target = log.segments[1]
    index = target.offset_index.path
    timeindex = target.time_index.path
    log.close()
    original = index.read_bytes()
    if damage == "delete":
        index.unlink()
        timeindex.unlink()
    elif damage == "partial_entry":
        index.write_bytes(original + b"\x01\x02")
    else:
        index.write_bytes(bytes(reversed(original)))
    reopened = reopen(tmp_path, clock, clean=True, recovery_point=stored[-1].last_offset + 1)
    assert index.read_bytes() == original
    assert read_all(reopened) == stored
    found = reopened.offset_for_timestamp(stored[-1].max_timestamp)
    assert found is not None and found.offset == stored[-1].base_offset


def test_leftover_files_are_cleaned_up(tmp_path: Path) -> None:
    clock = ManualClock()
    log, stored = build(tmp_path, clock)
    directory = log.directory
    log.close()
    (directory / "00000000000000000999.log.deleted").write_bytes(b"x")
    (directory / "00000000000000000000.log.cleaned").write_bytes(b"x")
    (directory / "00000000000000000777.index").write_bytes(b"")  # orphan index
    reopened = reopen(tmp_path, clock, clean=True, recovery_point=stored[-1].last_offset + 1)
    names = {p.name for p in directory.iterdir()}
    assert not any(n.endswith((".deleted", ".cleaned")) for n in names)
    assert "00000000000000000777.index" not in names
    assert read_all(reopened) == stored


def test_an_interrupted_swap_replaces_the_segments_it_covers(tmp_path: Path) -> None:
    clock = ManualClock()
    log, stored = build(tmp_path, clock)
    directory = log.directory
    first, second = log.segments[0], log.segments[1]
    # A compaction that merged the first two segments into one file, stopped before the rename.
    merged = first.records.path.read_bytes() + second.records.path.read_bytes()
    log.close()
    (directory / f"{first.base_offset:020d}.log.swap").write_bytes(merged)
    reopened = reopen(tmp_path, clock, clean=True, recovery_point=stored[-1].last_offset + 1)
    assert not (directory / f"{second.base_offset:020d}.log").exists()
    assert read_all(reopened) == stored
    assert reopened.number_of_segments == len(log.segments) - 1


def test_producer_state_survives_an_unclean_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, CONFIG)
    batches = [
        make_batch(2, producer_id=9, producer_epoch=0, base_sequence=2 * i) for i in range(40)
    ]
    results = [append(log, b) for b in batches]
    assert log.number_of_segments > 2  # snapshots were taken at the rolls
    crash(log)
    reopened = reopen(tmp_path, clock, clean=False)
    retry = append(reopened, batches[-1])
    assert retry.duplicate and retry.first_offset == results[-1].first_offset
    assert not append(
        reopened, make_batch(1, producer_id=9, producer_epoch=0, base_sequence=80)
    ).duplicate
