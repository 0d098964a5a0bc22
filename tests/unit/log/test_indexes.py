from __future__ import annotations

import struct
from pathlib import Path

import pytest

from brokers.log.errors import CorruptIndexError
from brokers.log.offset_index import OffsetIndex
from brokers.log.time_index import TimeIndex

pytestmark = pytest.mark.unit

BASE = 1000


def test_offset_index_floor_lookup_and_file_format(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex.create(path, BASE, 1024)
    for offset, position in [(1004, 100), (1010, 250), (1020, 600)]:
        index.append(offset, position)
    index.write_staged()
    assert index.lookup(999) == (BASE, 0)
    assert index.lookup(1003) == (BASE, 0)
    assert index.lookup(1004) == (1004, 100)
    assert index.lookup(1015) == (1010, 250)
    assert index.lookup(5000) == (1020, 600)
    assert index.floor_position(300) == 250
    assert index.floor_position(99) == 0
    # Kafka's layout: big-endian (relative offset int32, position int32)
    assert path.read_bytes() == struct.pack(">iiiiii", 4, 100, 10, 250, 20, 600)


def test_offset_index_truncate_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex.create(path, BASE, 1024)
    for i in range(1, 6):
        index.append(BASE + 10 * i, 100 * i)
    index.write_staged()
    index.truncate_to(1030)  # drops entries for offsets >= 1030
    assert index.entries == 2
    index.append(1031, 300)  # staged, then cut again by position
    index.truncate_to_position(300)
    index.close()
    reloaded = OffsetIndex.load(path, BASE, 1024)
    assert reloaded.entries == 2
    assert reloaded.last_entry() == (1020, 200)


def test_offset_index_capacity_comes_from_index_bytes(tmp_path: Path) -> None:
    index = OffsetIndex.create(tmp_path / "x.index", BASE, 3 * 8)
    assert index.max_entries == 3
    for i in range(1, 4):
        assert not index.is_full
        index.append(BASE + i, i * 10)
    assert index.is_full


@pytest.mark.parametrize(
    "content",
    [
        struct.pack(">ii", 5, 10) + b"\x00\x01",  # partial entry
        struct.pack(">iiii", 5, 10, 4, 20),  # offsets going backwards
        struct.pack(">iiii", 5, 10, 6, 5),  # positions going backwards
        struct.pack(">ii", -3, 10),  # negative relative offset
    ],
)
def test_offset_index_sanity_check_rejects_bad_files(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError):
        OffsetIndex.load(path, BASE, 1024)


def test_offset_index_refuses_entries_out_of_order(tmp_path: Path) -> None:
    index = OffsetIndex.create(tmp_path / "x.index", BASE, 1024)
    index.append(1005, 100)
    with pytest.raises(CorruptIndexError):
        index.append(1005, 200)


def test_time_index_only_grows_and_looks_up_by_floor(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    index = TimeIndex.create(path, BASE, 1200)
    index.maybe_append(500, 1001)
    index.maybe_append(500, 1002)  # same timestamp: no new entry (Kafka's maybeAppend)
    index.maybe_append(400, 1003)  # older: ignored
    index.maybe_append(900, 1004)
    index.write_staged()
    assert index.entries == 2
    assert index.lookup(100) == (-1, BASE)
    assert index.lookup(700) == (500, 1001)
    assert index.lookup(900) == (900, 1004)
    assert path.read_bytes() == struct.pack(">qiqi", 500, 1, 900, 4)
    index.truncate_to(1004)
    index.close()
    assert TimeIndex.load(path, BASE, 1200).last_entry() == (500, 1001)


def test_time_index_full_still_takes_the_final_entry(tmp_path: Path) -> None:
    index = TimeIndex.create(tmp_path / "x.timeindex", BASE, 12)
    index.maybe_append(10, 1001)
    assert index.is_full
    index.maybe_append(20, 1002)
    assert index.entries == 1
    index.maybe_append(30, 1003, skip_full_check=True)
    assert index.last_entry() == (30, 1003)


def test_time_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    path.write_bytes(struct.pack(">qiqi", 900, 1, 500, 4))
    with pytest.raises(CorruptIndexError):
        TimeIndex.load(path, BASE, 1200)
    path.write_bytes(struct.pack(">qi", 900, 1) + b"\x00")
    with pytest.raises(CorruptIndexError):
        TimeIndex.load(path, BASE, 1200)
