"""A fetch region keeps its segment file open for as long as it is held, through every way a log
lets go of a segment, and no longer.

A region read from a segment that DeleteRecords, retention or compaction then removes (renamed
`.deleted`, unlinked after `file.delete.delay.ms`) still reads that segment's bytes — also after
another file was opened, which on Linux takes the lowest free descriptor number — and the file
closes once the region is dropped. Closing the log (shutdown) closes every segment file no region
holds at once. Real logs on real files (tests/unit/server/test_region_fd_reuse.py sends such
regions through the connection's real send paths).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.file_records import FileRecords
from brokers.log.log import Log
from tests.unit.log.partition_helpers import append, held_by_process, make_batch, open_log

pytestmark = pytest.mark.unit

DELAY_MS = 1_000


def _two_segments(tmp_path: Path, clock: ManualClock) -> Log:
    log = open_log(tmp_path, clock, LogConfig(file_delete_delay_ms=DELAY_MS))
    for _ in range(3):
        append(log, make_batch(5, value=b"a" * 100))
    log.roll()
    append(log, make_batch(5, value=b"b" * 100))
    return log


def test_a_region_reads_its_segment_after_deletion_and_closes_when_dropped(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    log = _two_segments(tmp_path, clock)
    first = log.segments[0]
    region = log.read(0, 1 << 20).region
    assert region is not None
    expected = region.read()
    log.delete_records_before(first.next_offset)
    clock.advance(DELAY_MS + 1)
    assert log.delete_expired_segment_files() == 1
    segment_file = log.directory / f"{0:020d}.log.deleted"
    assert not segment_file.exists()  # unlinked: only the region holds it now
    other = FileRecords.open(tmp_path / "other.log", create=True)  # the lowest free number
    other.append([b"x" * len(expected)])
    try:
        assert region.read() == expected
        assert held_by_process(segment_file)
        del region
        assert not held_by_process(segment_file)
    finally:
        other.close()
        log.close()


def test_closing_the_log_closes_every_file_no_region_holds(tmp_path: Path) -> None:
    clock = ManualClock()
    log = _two_segments(tmp_path, clock)
    read = log.read(0, 1 << 20)
    assert read.region is not None
    kept = read.region
    log.read(log.segments[1].base_offset, 1 << 20)  # a region dropped at once
    log.close()
    assert held_by_process(log.directory) == [str(log.directory / f"{0:020d}.log")]
    assert kept.read()  # still readable after the log closed
    del kept, read
    assert held_by_process(log.directory) == []
