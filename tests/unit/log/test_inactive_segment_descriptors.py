"""Only the active segment holds a descriptor: a partition costs the 1 the broker's budget promises
(brokers/common/descriptors.py) however many times it rolls, an inactive segment opens its `.log`
on demand for a read (file_records), and index files are open only while written (index_file).

Before this, a roll kept the old segment's `.log` read descriptor open: one more per roll, which
no budget counted, so partitions created as the limit allowed failed to roll once clients held
their share of the reserve (tests/e2e/test_review_s35_fd_budget.py). Here, real logs on real
files: N rolls leave 1 descriptor; old segments still read (also after a reload); a region of an
old segment keeps its own file while it is held, also after other files took the lowest free
numbers (docs/security.md F3), and shares it with the next read of that segment; a full
descriptor table refuses a cold read without taking the log offline; a failed roll's undo and a
follower's truncation make the segment left active hold its descriptor again.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.errors import LogOfflineError, StorageError
from brokers.log.file_records import FileRecords
from brokers.log.log import Log
from tests.unit.log import txn_helpers
from tests.unit.log.faulty_files import FaultyFiles
from tests.unit.log.partition_helpers import (
    append,
    headers_of,
    held_by_process,
    make_batch,
    open_log,
    read_all,
)

pytestmark = pytest.mark.unit

ROLLS = 12
T0 = 1_700_000_000_000
ACTIVE = 1  # the active segment's .log, read and written through one descriptor


def _rolled(tmp_path: Path, rolls: int = ROLLS) -> Log:
    """A log with `rolls` rolls behind it, each segment holding two batches."""
    log = open_log(tmp_path, ManualClock(T0), LogConfig(index_interval_bytes=1))
    for _ in range(rolls):
        append(log, make_batch(3, value=b"a" * 50))
        append(log, make_batch(3, value=b"b" * 50))
        log.roll()
    append(log, make_batch(3, value=b"c" * 50))
    return log


def _segment_file(log: Log, index: int) -> str:
    return str(log.directory / f"{log.segments[index].base_offset:020d}.log")


def test_any_number_of_rolls_leaves_the_partition_holding_one_descriptor(
    tmp_path: Path,
) -> None:
    log = _rolled(tmp_path)
    try:
        assert len(log.segments) == ROLLS + 1
        held = held_by_process(log.directory)
        assert held == [_segment_file(log, -1)], held
        assert [b.base_offset for b in read_all(log)] == list(range(0, 3 * (2 * ROLLS + 1), 3))
        assert len(held_by_process(log.directory)) == ACTIVE  # the reads' descriptors closed
    finally:
        log.close()


def test_a_reloaded_log_holds_only_its_active_segment_s_descriptors(tmp_path: Path) -> None:
    _rolled(tmp_path).close()
    log = open_log(tmp_path, ManualClock(T0), had_clean_shutdown=True, recovery_point=10**6)
    try:
        assert set(held_by_process(log.directory)) == {_segment_file(log, -1)}
        assert len(read_all(log)) == 2 * ROLLS + 1
        append(log, make_batch(1))
        assert len(held_by_process(log.directory)) <= ACTIVE
    finally:
        log.close()


def test_a_region_of_an_old_segment_keeps_its_file_and_shares_it_with_the_next_read(
    tmp_path: Path,
) -> None:
    log = _rolled(tmp_path)
    first = _segment_file(log, 0)
    others: list[FileRecords] = []
    try:
        region = log.read(0, 1 << 20).region
        assert region is not None
        expected = region.read()
        assert held_by_process(log.directory).count(first) == 1
        for number in range(3):  # new files take the lowest free descriptor numbers
            other = FileRecords.open(tmp_path / f"other-{number}.log", create=True)
            other.append([b"x" * len(expected)])
            others.append(other)
        again = log.read(3, 1 << 20).region  # the same segment while the region is held
        assert again is not None and again.file is region.file
        assert held_by_process(log.directory).count(first) == 1
        assert region.read() == expected
        del region, again
        assert first not in held_by_process(log.directory)  # closed once nothing holds it
    finally:
        for other in others:
            other.close()
        log.close()


def test_a_full_descriptor_table_refuses_a_cold_read_and_the_log_stays_online(
    tmp_path: Path,
) -> None:
    files = FaultyFiles()
    log = Log.open(
        tmp_path / "topic-0", LogConfig(), clock=ManualClock(T0), recovery_point=0, files=files
    )
    try:
        append(log, make_batch(2))
        log.roll()
        append(log, make_batch(2))
        files.fail("open", name_suffix=".log", error=errno.EMFILE, sticky=True)
        with pytest.raises(StorageError) as refused:
            log.read(0, 1 << 20)
        assert not isinstance(refused.value, LogOfflineError), refused.value
        assert not log.offline
        files.heal()  # a connection closed: the table has room again
        assert [b.base_offset for b in read_all(log)] == [0, 2]
    finally:
        log.close()


def test_an_undone_roll_leaves_the_old_segment_active_holding_its_descriptor(
    tmp_path: Path,
) -> None:
    files = FaultyFiles()
    config = LogConfig(segment_bytes=1 << 10)
    log = Log.open(tmp_path / "topic-0", config, clock=ManualClock(T0), files=files)
    try:
        append(log, make_batch(3, value=b"a" * 300))
        files.fail("open", name_suffix=".index")  # the new segment's index: the roll fails
        big = make_batch(3, value=b"b" * 300)
        with pytest.raises(StorageError):
            log.append_as_leader(big, headers_of(big), leader_epoch=0)
        files.heal()
        assert len(log.segments) == 1 and not log.offline
        read_all(log)
        assert log.active_segment.records.reader_held
        append(log, make_batch(1))  # written through the descriptor it holds again
        assert held_by_process(log.directory) == [_segment_file(log, -1)]
    finally:
        log.close()


def test_a_follower_s_truncation_leaves_the_segment_it_returns_to_holding_its_descriptor(
    tmp_path: Path,
) -> None:
    log = _rolled(tmp_path, rolls=2)
    try:
        assert not log.segments[1].records.reader_held
        log.truncate_to(log.segments[1].base_offset + 3)  # into the middle segment
        assert len(log.segments) == 2
        append(log, make_batch(1))
        read_all(log)
        assert log.active_segment.records.reader_held
        assert held_by_process(log.directory) == [_segment_file(log, -1)]
    finally:
        log.close()


def test_an_aborted_transaction_leaves_the_partition_holding_one_descriptor(
    tmp_path: Path,
) -> None:
    """An ABORT marker writes the active segment's `.txnindex` and closes it again: a partition
    with aborted transactions holds no descriptor that the budget never promised it (the index
    was kept open until the roll)."""
    log = txn_helpers.open_log(tmp_path, config=LogConfig(index_interval_bytes=1))
    try:
        for pid in (7, 8):
            producer = txn_helpers.Producer(pid)
            txn_helpers.send(log, producer)
            txn_helpers.end(log, producer, commit=False)
        assert len(log.active_segment.txn_index) == 2
        held = held_by_process(log.directory)
        assert len(held) == ACTIVE and not any(h.endswith(".txnindex") for h in held), held
        assert log.descriptors_held == ACTIVE
        log.flush()  # an fsync of the index opens it for a moment only
        assert len(held_by_process(log.directory)) == ACTIVE
        assert log.collect_aborted(0, log.log_end_offset)  # served from memory
    finally:
        log.close()


def test_descriptors_held_counts_what_the_active_segment_holds(tmp_path: Path) -> None:
    """What the budget promises a partition is its 1 if it does not hold it now
    (brokers/common/descriptors.py): new, written and reloaded logs hold it; appends that make
    index entries open no index file (staged until 8 KiB, a flush or a roll: index_file)."""
    log = open_log(tmp_path, ManualClock(T0), LogConfig(index_interval_bytes=1))
    assert log.descriptors_held == ACTIVE == len(held_by_process(log.directory))
    append(log, make_batch(1))
    append(log, make_batch(1))
    assert log.active_segment.offset_index.entries == 1  # the second batch made an entry
    assert log.descriptors_held == ACTIVE == len(held_by_process(log.directory))
    log.close()
    log = open_log(tmp_path, ManualClock(T0), had_clean_shutdown=True, recovery_point=10**6)
    try:
        assert log.descriptors_held == ACTIVE == len(held_by_process(log.directory))
        append(log, make_batch(1))
        assert log.descriptors_held == ACTIVE == len(held_by_process(log.directory))
    finally:
        log.close()


def test_a_capped_read_of_a_cold_segment_opens_its_file_once(tmp_path: Path) -> None:
    """A read whose upper bound falls inside an inactive segment (a high watermark or a last
    stable offset there) scans for the cap and then reads: one open for both, not one each."""
    files = FaultyFiles()
    log = Log.open(
        tmp_path / "topic-0", LogConfig(), clock=ManualClock(T0), recovery_point=0, files=files
    )
    try:
        for _ in range(3):
            append(log, make_batch(2))
        log.roll()
        append(log, make_batch(2))
        first = log.segments[0]
        opened_before = sum(1 for c in files.calls if c.op == "open" and c.name.endswith(".log"))
        read = log.read(0, 1 << 20, max_offset=4)  # capped inside the inactive first segment
        opens = sum(1 for c in files.calls if c.op == "open" and c.name.endswith(".log"))
        assert read.region is not None and read.next_offset == 4
        assert not first.records.reader_held
        assert opens - opened_before == 1
    finally:
        log.close()
