"""The `.txnindex` of one segment: Kafka's entry format, lazy file, collect, truncate, undo."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from brokers.log.errors import CorruptIndexError
from brokers.log.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex

pytestmark = pytest.mark.unit

BASE = 100


def index_at(tmp_path: Path) -> TransactionIndex:
    return TransactionIndex(tmp_path / f"{BASE:020d}.txnindex", BASE)


def filled(tmp_path: Path) -> TransactionIndex:
    index = index_at(tmp_path)
    for txn in ENTRIES:
        index.append(txn)
    return index


ENTRIES = [
    AbortedTxn(producer_id=7, first_offset=90, last_offset=105, last_stable_offset=95),
    AbortedTxn(producer_id=8, first_offset=95, last_offset=110, last_stable_offset=111),
    AbortedTxn(producer_id=7, first_offset=120, last_offset=130, last_stable_offset=125),
    AbortedTxn(producer_id=9, first_offset=125, last_offset=140, last_stable_offset=141),
]


def test_entries_are_kafkas_34_byte_layout(tmp_path: Path) -> None:
    index = filled(tmp_path)
    data = index.path.read_bytes()
    assert ENTRY_SIZE == 34 and len(data) == 34 * len(ENTRIES)
    # AbortedTxn.java: version int16 (0), producerId, firstOffset, lastOffset, lastStableOffset.
    assert data[:34] == struct.pack(">hqqqq", 0, 7, 90, 105, 95)
    reloaded = TransactionIndex.load(index.path, BASE)
    assert reloaded.entries == tuple(ENTRIES)


def test_the_file_exists_only_once_there_is_an_entry(tmp_path: Path) -> None:
    index = index_at(tmp_path)
    index.flush()
    index.close()
    assert not index.path.exists()
    assert TransactionIndex.load(index.path, BASE).entries == ()
    index.append(ENTRIES[0])
    assert index.path.stat().st_size == ENTRY_SIZE


def test_a_stale_file_under_a_new_index_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / f"{BASE:020d}.txnindex"
    path.write_bytes(ENTRIES[3].encode())
    index = TransactionIndex(path, BASE)  # a new segment: whatever is there is not its data
    index.append(ENTRIES[0])
    assert TransactionIndex.load(path, BASE).entries == (ENTRIES[0],)


@pytest.mark.parametrize(
    ("fetch", "upper", "expected", "complete"),
    [
        (100, 200, ENTRIES, False),  # every LSO is below 200: later segments may hold more
        (106, 112, ENTRIES[1:2], True),  # the 2nd's LSO 111 < 112 goes on; the 3rd's 125 stops
        (106, 111, ENTRIES[1:2], True),  # the 2nd's LSO 111 >= 111: no later marker matters
        (131, 141, ENTRIES[3:], True),
        (141, 200, [], False),
        (100, 91, ENTRIES[:1], True),  # only the 1st starts below 91 (and its LSO 95 stops)
    ],
)
def test_collect(
    tmp_path: Path, fetch: int, upper: int, expected: list[AbortedTxn], complete: bool
) -> None:
    found, done = filled(tmp_path).collect(fetch, upper)
    assert (found, done) == (expected, complete)


def test_last_offsets_must_increase(tmp_path: Path) -> None:
    index = filled(tmp_path)
    with pytest.raises(ValueError, match="does not follow"):
        index.append(AbortedTxn(1, 130, 140, 141))
    with pytest.raises(ValueError, match="does not follow"):
        index_at(tmp_path / "x").append(AbortedTxn(1, 10, BASE - 1, BASE))
    assert len(index) == len(ENTRIES)


def test_truncate_to_drops_markers_at_or_after_the_offset(tmp_path: Path) -> None:
    index = filled(tmp_path)
    index.truncate_to(130)
    assert index.entries == tuple(ENTRIES[:2])
    assert TransactionIndex.load(index.path, BASE).entries == tuple(ENTRIES[:2])
    index.append(ENTRIES[2])  # appends continue after the cut
    index.truncate_to(BASE)
    assert index.entries == () and not index.path.exists()


def test_restore_and_reset(tmp_path: Path) -> None:
    index = filled(tmp_path)
    with open(index.path, "ab") as torn:
        torn.write(b"\x00" * 10)  # what a failed write may leave
    index.restore(3)
    assert TransactionIndex.load(index.path, BASE).entries == tuple(ENTRIES[:3])
    index.reset()
    assert index.entries == () and not index.path.exists()


@pytest.mark.parametrize(
    "data",
    [
        ENTRIES[0].encode()[:-1],  # partial entry
        struct.pack(">hqqqq", 1, 7, 90, 105, 95),  # unknown version
        ENTRIES[1].encode() + ENTRIES[0].encode(),  # last offsets going back
        AbortedTxn(7, 10, BASE - 1, 11).encode(),  # a marker before the segment
        AbortedTxn(7, 110, 105, 111).encode(),  # first after last
    ],
)
def test_load_refuses_corrupt_files(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "x.txnindex"
    path.write_bytes(data)
    with pytest.raises(CorruptIndexError):
        TransactionIndex.load(path, BASE)


def test_rename_and_delete_with_and_without_a_file(tmp_path: Path) -> None:
    empty, full = index_at(tmp_path / "a"), filled(tmp_path)
    (tmp_path / "a").mkdir()
    for index in (empty, full):
        index.close()
        index.rename(index.path.with_name(index.path.name + ".deleted"))
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == [f"{BASE:020d}.txnindex.deleted"]
    assert not list((tmp_path / "a").iterdir())
    full.delete()
    empty.delete()
    assert not [p for p in tmp_path.iterdir() if p.is_file()]


def test_a_stale_file_is_never_renamed_along(tmp_path: Path) -> None:
    """A cleaner's fresh `.txnindex.cleaned` with no entry must not carry a leftover file of
    the same name into the log as the cleaned segment's index."""
    path = tmp_path / f"{BASE:020d}.txnindex.cleaned"
    path.write_bytes(ENTRIES[0].encode())
    index = TransactionIndex(path, BASE)
    index.rename(tmp_path / f"{BASE:020d}.txnindex")
    assert not [p for p in tmp_path.iterdir()]
