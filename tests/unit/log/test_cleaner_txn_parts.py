"""The cleaner's transaction parts on their own: CleanedTransactions and the batch filter's rules
for aborted data and markers (Kafka's CleanedTransactionMetadata and cleanInto's filter)."""

from __future__ import annotations

import pytest

from brokers.log.cleaner.batch_filter import FilterContext, LastRecord, filter_batch
from brokers.log.cleaner.offset_map import ENTRY_BYTES, OffsetMap
from brokers.log.cleaner.transactions import CleanedTransactions
from brokers.log.txn_index import AbortedTxn
from brokers.records.batch import DELETE_HORIZON_MASK, parse_header
from brokers.records.builder import build_batch, read_batch
from brokers.records.control import EndTxnMarker, marker_record, read_marker
from brokers.records.record import Record

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
RETENTION = 1000


def data(
    base: int, producer_id: int = -1, *, txn: bool = False, count: int = 1, epoch: int = 0
) -> memoryview:
    records = [Record(i, i, b"k%d" % i, b"v%d" % i) for i in range(count)]
    return memoryview(
        build_batch(
            records,
            base_offset=base,
            producer_id=producer_id,
            producer_epoch=epoch if producer_id >= 0 else -1,
            base_sequence=0 if producer_id >= 0 else -1,
            is_transactional=txn,
            base_timestamp=NOW - 50,
        )
    )


def marker(base: int, producer_id: int, *, commit: bool, epoch: int = 0) -> memoryview:
    return memoryview(
        build_batch(
            [marker_record(EndTxnMarker(commit, 7))],
            base_offset=base,
            producer_id=producer_id,
            producer_epoch=epoch,
            is_transactional=True,
            is_control=True,
            base_timestamp=NOW - 40,
        )
    )


def control(base: int, producer_id: int, key: bytes) -> memoryview:
    return memoryview(
        build_batch(
            [Record(0, 0, key, b"\x00\x00")],
            base_offset=base,
            producer_id=producer_id,
            producer_epoch=0,
            is_transactional=True,
            is_control=True,
            base_timestamp=NOW,
        )
    )


def walk(txns: CleanedTransactions, batch: memoryview) -> bool:
    header = parse_header(batch)
    return txns.on_control_batch(batch, header) if header.is_control else txns.on_batch(header)


# -- CleanedTransactions -------------------------------------------------------------------


def test_aborted_data_is_discardable_and_its_marker_stays_while_data_was_walked() -> None:
    aborted = AbortedTxn(producer_id=1, first_offset=0, last_offset=3, last_stable_offset=0)
    txns = CleanedTransactions([aborted])
    assert walk(txns, data(0, 1, txn=True)) is True
    assert walk(txns, data(1, 2, txn=True)) is False  # producer 2 commits below
    assert walk(txns, data(2, 1, txn=True, count=1)) is True
    assert walk(txns, data(5, -1)) is False  # not transactional, inside the aborted range
    assert walk(txns, marker(3, 1, commit=False)) is False
    assert walk(txns, marker(4, 2, commit=True)) is False
    assert txns.take_retained() == [aborted]
    assert txns.take_retained() == []

    later_round = CleanedTransactions([aborted])  # the data is gone: the markers may go
    assert walk(later_round, marker(3, 1, commit=False)) is True
    assert walk(later_round, marker(4, 2, commit=True)) is True
    assert later_round.take_retained() == []


def test_a_producer_s_next_transaction_after_an_abort_is_not_aborted() -> None:
    aborted = AbortedTxn(producer_id=1, first_offset=10, last_offset=11, last_stable_offset=10)
    txns = CleanedTransactions()
    txns.add_aborted([aborted])
    assert walk(txns, data(10, 1, txn=True)) is True
    txns.add_aborted([aborted])  # listed again by the next segment's look-up: taken in once
    assert walk(txns, marker(11, 1, commit=False)) is False
    assert walk(txns, data(12, 1, txn=True)) is False
    assert walk(txns, marker(13, 1, commit=True)) is False
    assert walk(txns, marker(14, 1, commit=True)) is True  # no data since the previous marker
    assert txns.take_retained() == [aborted]


def test_empty_control_batches_go_and_other_control_records_stay() -> None:
    empty = memoryview(
        build_batch(
            [],
            base_offset=3,
            last_offset_delta=0,
            producer_id=1,
            producer_epoch=0,
            is_transactional=True,
            is_control=True,
        )
    )
    txns = CleanedTransactions()
    assert walk(txns, empty) is True
    assert walk(txns, control(4, 1, b"\x00\x00\x00\x03")) is False  # KRaft's control types


# -- the batch filter ----------------------------------------------------------------------


def context(**overrides: object) -> FilterContext:
    settings: dict[str, object] = {
        "now_ms": NOW, "delete_retention_ms": RETENTION, "latest_offset": 1000,
        "upper_bound_offset": 10_000, "producer_last_records": {},
    }  # fmt: skip
    settings.update(overrides)
    return FilterContext(**settings)  # type: ignore[arg-type]


def empty_map() -> OffsetMap:
    offsets = OffsetMap(ENTRY_BYTES * 16)
    offsets.clear()
    offsets.update_latest_offset(1000)
    return offsets


def test_aborted_data_goes_whole_unless_it_holds_producer_state() -> None:
    batch = data(20, 5, txn=True, count=3, epoch=2)
    header = parse_header(batch)
    offsets = empty_map()
    kept = filter_batch(batch, header, offsets, context())
    assert kept.data is batch  # no key superseded, not discardable
    dropped = filter_batch(batch, header, offsets, context(), discardable=True)
    assert (dropped.data, dropped.records_read, dropped.records_kept) == (None, 3, 0)
    last = context(producer_last_records={5: LastRecord(22, 2)})
    emptied = filter_batch(batch, header, offsets, last, discardable=True)
    assert emptied.header is not None and emptied.header.records_count == 0
    assert (emptied.header.base_offset, emptied.header.last_offset) == (20, 22)
    assert emptied.header.is_transactional and emptied.header.producer_epoch == 2


def test_a_discardable_marker_gets_a_horizon_then_goes_once_it_passed() -> None:
    batch = marker(30, 5, commit=True)
    offsets = empty_map()
    assert filter_batch(batch, parse_header(batch), offsets, context()).data is batch

    first = filter_batch(batch, parse_header(batch), offsets, context(), discardable=True)
    assert first.data is not None and first.header is not None
    header, records = read_batch(first.data)
    assert header.attributes & DELETE_HORIZON_MASK and header.base_timestamp == NOW + RETENTION
    assert header.is_control and header.is_transactional and header.base_offset == 30
    assert header.base_timestamp + records[0].timestamp_delta == NOW - 40
    assert header.max_timestamp == NOW - 40
    assert read_marker(first.data) == EndTxnMarker(True, 7)

    stored = memoryview(first.data)
    before = context(now_ms=NOW + RETENTION - 1)
    assert filter_batch(stored, header, offsets, before, discardable=True).data is stored
    assert filter_batch(stored, header, offsets, context(now_ms=NOW + 5000)).data is stored
    after = context(now_ms=NOW + RETENTION)
    assert filter_batch(stored, header, offsets, after, discardable=True).data is None


def test_a_marker_holding_the_producer_s_epoch_is_kept_empty() -> None:
    batch = marker(30, 5, commit=False, epoch=3)
    header = parse_header(batch)
    gone = context(now_ms=NOW + 2 * RETENTION)
    first = filter_batch(batch, header, empty_map(), context(), discardable=True)
    assert first.data is not None
    stored = memoryview(first.data)
    horizon_header = parse_header(stored)
    for last, kept in (
        (LastRecord(None, 3), True),  # the producer's last entry is this epoch's marker
        (LastRecord(None, 4), False),
        (LastRecord(12, 3), False),  # its last data batch holds its state, not the marker
    ):
        result = filter_batch(
            stored, horizon_header, empty_map(),
            context(now_ms=gone.now_ms, producer_last_records={5: last}), discardable=True,
        )  # fmt: skip
        assert (result.data is not None) is kept
        if result.header is not None:
            assert result.header.is_control and result.header.records_count == 0
            assert not result.header.attributes & DELETE_HORIZON_MASK
            assert result.data is not None
            empty_again = filter_batch(
                memoryview(result.data), result.header, empty_map(), context(), discardable=True
            )
            assert empty_again.data is None  # an empty marker goes once nothing needs it
