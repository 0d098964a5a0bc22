from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.file_records import FileRecords
from brokers.log.offset_assignment import assign_offsets
from brokers.log.segment import LogSegment
from brokers.records.batch import BatchHeader, iter_headers
from tests.unit.log.partition_helpers import make_batch

pytestmark = pytest.mark.unit

BASE = 100
T0 = 1_700_000_000_000


def new_segment(tmp_path: Path, clock: ManualClock, *, interval: int = 200) -> LogSegment:
    return LogSegment.create(
        tmp_path, BASE, clock=clock, index_interval_bytes=interval, max_index_bytes=4096
    )


def append_batches(segment: LogSegment, batches: list[bytes]) -> list[BatchHeader]:
    data = b"".join(batches)
    assigned = assign_offsets(
        data,
        list(iter_headers(data)),
        first_offset=segment.next_offset,
        leader_epoch=3,
        log_append_time_ms=None,
    )
    segment.append(assigned.headers, assigned.parts)
    return assigned.headers


def filled(
    tmp_path: Path, clock: ManualClock, count: int = 30
) -> tuple[LogSegment, list[BatchHeader]]:
    segment = new_segment(tmp_path, clock)
    headers: list[BatchHeader] = []
    for i in range(count):
        headers += append_batches(segment, [make_batch(1 + i % 3, timestamp=T0 + i)])
    return segment, headers


def test_append_assigns_offsets_and_indexes_sparse_entries(tmp_path: Path) -> None:
    segment, headers = filled(tmp_path, ManualClock())
    assert headers[0].base_offset == BASE
    assert all(b.base_offset == a.next_offset for a, b in itertools.pairwise(headers))
    assert segment.next_offset == headers[-1].next_offset
    assert segment.size == sum(h.size for h in headers)
    assert 0 < segment.offset_index.entries < len(headers)  # sparse: every ~200 bytes
    assert all(h.partition_leader_epoch == 3 for h in headers)


def test_translate_offset_finds_the_batch_holding_every_offset(tmp_path: Path) -> None:
    segment, headers = filled(tmp_path, ManualClock())
    position = 0
    for header in headers:
        for offset in range(header.base_offset, header.next_offset):
            location = segment.translate_offset(offset)
            assert location is not None
            assert (location.base_offset, location.position, location.size) == (
                header.base_offset,
                position,
                header.size,
            )
        position += header.size
    assert segment.translate_offset(segment.next_offset) is None


def test_read_returns_only_whole_batches(tmp_path: Path) -> None:
    segment, headers = filled(tmp_path, ManualClock())
    sizes = [h.size for h in headers]
    for start in range(len(headers)):
        for max_size in (1, sizes[start], sizes[start] + 1, 500, 10_000):
            read = segment.read(headers[start].base_offset, max_size)
            assert read is not None and read.region is not None
            data = read.region.read()
            parsed = [h for _, h in iter_headers(data)]  # raises on a partial batch
            assert parsed[0].base_offset == headers[start].base_offset
            assert len(data) <= max(max_size, sizes[start])
            following = start + len(parsed)
            if following < len(headers):  # the next batch really did not fit
                assert len(data) + sizes[following] > max(max_size, sizes[start])
            assert read.next_offset == parsed[-1].next_offset


def test_read_without_min_one_batch_and_with_max_position(tmp_path: Path) -> None:
    segment, headers = filled(tmp_path, ManualClock())
    read = segment.read(BASE, 10, min_one_batch=False)
    assert read is not None and read.region is None
    limit = headers[0].size + headers[1].size  # position of the third batch
    read = segment.read(BASE, 1 << 20, max_position=limit)
    assert read is not None and read.region is not None
    assert read.region.size == limit and read.next_offset == headers[2].base_offset
    read = segment.read(headers[2].base_offset, 1 << 20, max_position=limit)
    assert read is not None and read.region is None


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    segment, headers = filled(tmp_path, ManualClock())
    for i, header in enumerate(headers):
        assert segment.find_offset_by_timestamp(T0 + i, BASE) == (header.base_offset, T0 + i, 3)
    assert segment.find_offset_by_timestamp(T0 + len(headers), BASE) is None
    inside = headers[5].base_offset + 1  # a log start inside a batch is answered as itself
    found = segment.find_offset_by_timestamp(0, inside)
    assert found is not None and found[0] == inside


def test_recover_rebuilds_identical_indexes(tmp_path: Path) -> None:
    segment, _ = filled(tmp_path, ManualClock())
    before = [segment.offset_index.lookup(o) for o in range(BASE, segment.next_offset)]
    max_ts = (segment.max_timestamp, segment.offset_of_max_timestamp)
    assert segment.recover() == 0
    assert [segment.offset_index.lookup(o) for o in range(BASE, segment.next_offset)] == before
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == max_ts


@pytest.mark.parametrize("where", ["crc", "base_offset", "length", "tail"])
def test_recover_truncates_at_the_first_bad_batch(tmp_path: Path, where: str) -> None:
    segment, headers = filled(tmp_path, ManualClock())
    bad = 7
    position = sum(h.size for h in headers[:bad])
    path = segment.records.path
    raw = bytearray(path.read_bytes())
    if where == "crc":
        raw[position + 70] ^= 0x01  # inside the records: CRC mismatch
    elif where == "base_offset":
        raw[position : position + 8] = bytes(8)  # outside the CRC: offsets must still increase
    elif where == "length":
        raw[position + 9] = 0x7F  # batch claims far more bytes than the file has
    else:
        raw = raw[: position + 30]  # cut mid-header
    path.write_bytes(bytes(raw))
    records = FileRecords.open(path)
    segment.records.close()
    segment.records = records
    truncated = segment.recover()
    assert truncated == len(raw) - position
    assert segment.size == position
    assert segment.next_offset == headers[bad].base_offset
    assert segment.translate_offset(headers[bad - 1].base_offset) is not None


def test_truncate_to_cuts_batch_holding_offset(tmp_path: Path) -> None:
    segment, headers = filled(tmp_path, ManualClock())
    target = headers[10]
    removed = segment.truncate_to(target.base_offset + target.last_offset_delta)
    assert removed == sum(h.size for h in headers[10:])
    assert segment.next_offset == target.base_offset
    assert segment.max_timestamp == headers[9].max_timestamp
    assert segment.translate_offset(target.base_offset) is None
    append_batches(segment, [make_batch(2)])
    assert segment.translate_offset(target.base_offset + 1) is not None


def test_should_roll_rules(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    segment = new_segment(tmp_path, clock)
    roll = dict(now_ms=T0, segment_bytes=1000, segment_ms=60_000)
    assert not segment.should_roll(messages_size=900, max_timestamp=T0, max_offset=BASE, **roll)
    append_batches(segment, [make_batch(1, timestamp=T0)])
    size = segment.size
    assert segment.should_roll(messages_size=1001 - size, max_timestamp=T0, max_offset=BASE, **roll)
    assert not segment.should_roll(
        messages_size=10, max_timestamp=T0 + 60_000, max_offset=BASE, **roll
    )
    # segment.ms counts from the first batch's timestamp (Kafka's rollingBasedTimestamp)
    assert segment.should_roll(messages_size=10, max_timestamp=T0 + 60_001, max_offset=BASE, **roll)
    assert segment.should_roll(messages_size=10, max_timestamp=T0, max_offset=BASE + 2**31, **roll)


def test_append_of_more_buffers_than_iov_max(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, ManualClock(), interval=4096)
    batches = [make_batch(1, value=b"x") for _ in range(1500)]  # 3000 buffers
    headers = append_batches(segment, batches)
    assert segment.size == sum(len(b) for b in batches)
    data = segment.records.pread(0, segment.size)
    assert [h.base_offset for _, h in iter_headers(data)] == [h.base_offset for h in headers]


def test_deleted_segment_stays_readable_until_files_are_removed(tmp_path: Path) -> None:
    segment, _ = filled(tmp_path, ManualClock())
    read = segment.read(BASE, 1 << 20)
    assert read is not None and read.region is not None
    expected = read.region.read()
    segment.rename_to_deleted()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "00000000000000000100.index.deleted",
        "00000000000000000100.log.deleted",
        "00000000000000000100.timeindex.deleted",
    ]
    assert read.region.read() == expected
    segment.delete_files()
    assert list(tmp_path.iterdir()) == []


def test_open_rebuilds_a_missing_or_corrupt_index(tmp_path: Path) -> None:
    clock = ManualClock()
    segment, headers = filled(tmp_path, clock)
    lookups = [segment.offset_index.lookup(h.base_offset) for h in headers]
    segment.close()
    (tmp_path / "00000000000000000100.index").unlink()
    reopened, truncated = LogSegment.open(
        tmp_path, BASE, clock=clock, index_interval_bytes=200, max_index_bytes=4096
    )
    assert truncated == 0
    assert [reopened.offset_index.lookup(h.base_offset) for h in headers] == lookups
    reopened.close()
    index_path = tmp_path / "00000000000000000100.index"
    index_path.write_bytes(index_path.read_bytes()[:-3])
    again, truncated = LogSegment.open(
        tmp_path, BASE, clock=clock, index_interval_bytes=200, max_index_bytes=4096
    )
    assert truncated == 0 and again.next_offset == headers[-1].next_offset
    again.close()
    clean, truncated = LogSegment.open(
        tmp_path, BASE, clock=clock, index_interval_bytes=200, max_index_bytes=4096
    )
    assert truncated is None  # a sane index is loaded, not rebuilt
    assert clean.max_timestamp == T0 + len(headers) - 1
    clean.close()


def adopted(tmp_path: Path, clock: ManualClock) -> LogSegment:
    """A segment as a prepared log's first one: its `.log` made and open, nothing else."""
    fd = os.open(tmp_path / "00000000000000000100.log", os.O_RDWR | os.O_CREAT | os.O_EXCL)
    return LogSegment.adopt_empty(
        tmp_path, BASE, fd, clock=clock, index_interval_bytes=200, max_index_bytes=4096
    )


def names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def test_an_adopted_segment_makes_its_indexes_only_once_it_holds_data(tmp_path: Path) -> None:
    """A churned topic's partitions cost one file each until written (index_file)."""
    clock = ManualClock()
    segment = adopted(tmp_path, clock)
    segment.flush()
    segment.close()
    assert names(tmp_path) == ["00000000000000000100.log"]
    reopened, truncated = LogSegment.open(
        tmp_path, BASE, clock=clock, index_interval_bytes=200, max_index_bytes=4096
    )
    assert truncated is None  # an empty log with no index files is loaded, not rebuilt
    assert names(tmp_path) == ["00000000000000000100.log"]  # and opening made none
    headers = append_batches(reopened, [make_batch(1, timestamp=T0)])  # under one interval
    assert reopened.offset_index.entries == 0
    reopened.close()
    assert names(tmp_path) == [
        "00000000000000000100.index",
        "00000000000000000100.log",
        "00000000000000000100.timeindex",
    ]
    clean, truncated = LogSegment.open(
        tmp_path, BASE, clock=clock, index_interval_bytes=200, max_index_bytes=4096
    )
    assert truncated is None  # data beside both indexes: loaded as before, not rebuilt
    assert clean.next_offset == headers[-1].next_offset and clean.max_timestamp == T0
    clean.close()


def test_a_flush_leaves_the_indexes_unmade_and_a_roll_makes_them(tmp_path: Path) -> None:
    """A flush opens no index file it need not (with `flush.messages=1` an EMFILE there came
    after the data was appended); an unclean restart recovers the flushed active segment."""
    segment = adopted(tmp_path, ManualClock())
    append_batches(segment, [make_batch(1, timestamp=T0)])
    segment.flush()
    assert names(tmp_path) == ["00000000000000000100.log"]
    segment.on_become_inactive()  # rolled: a clean restart finds both indexes
    assert names(tmp_path) == [
        "00000000000000000100.index",
        "00000000000000000100.log",
        "00000000000000000100.timeindex",
    ]
    segment.records.close()


def test_a_crash_before_the_indexes_were_made_rebuilds_them(tmp_path: Path) -> None:
    clock = ManualClock()
    segment = adopted(tmp_path, clock)
    headers = append_batches(segment, [make_batch(2, timestamp=T0)])  # under one interval
    segment.records.close()  # the process died: no flush, roll or close made the indexes
    assert names(tmp_path) == ["00000000000000000100.log"]
    reopened, truncated = LogSegment.open(
        tmp_path, BASE, clock=clock, index_interval_bytes=200, max_index_bytes=4096
    )
    assert truncated == 0  # data beside a missing index: rebuilt from the log, nothing lost
    assert reopened.next_offset == headers[-1].next_offset and reopened.max_timestamp == T0
    reopened.close()
