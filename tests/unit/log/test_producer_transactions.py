"""Producer state's transactions: open and unreplicated ones, LSO, markers, snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.common.clock import ManualClock
from brokers.log.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError
from brokers.log.producer_state.manager import ProducerStateManager
from brokers.log.producer_state.transactions import CompletedTxn
from brokers.log.txn_index import AbortedTxn
from brokers.records.batch import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader
from brokers.records.control import EndTxnMarker

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000


def header(
    pid: int, offset: int, *, count: int = 1, epoch: int = 0, control: bool = False,
    transactional: bool = True, records: int | None = None,
) -> BatchHeader:  # fmt: skip
    attributes = (TRANSACTIONAL_MASK if transactional else 0) | (CONTROL_MASK if control else 0)
    return BatchHeader(
        base_offset=offset, batch_length=49 + 10 * count, partition_leader_epoch=0, magic=2,
        crc=0, attributes=attributes, last_offset_delta=count - 1, base_timestamp=T0,
        max_timestamp=T0, producer_id=pid, producer_epoch=epoch,
        base_sequence=-1 if control else offset, records_count=count if records is None else records,
    )  # fmt: skip


def marker(pid: int, offset: int, *, epoch: int = 0) -> BatchHeader:
    return header(pid, offset, epoch=epoch, control=True)


@pytest.fixture
def state(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, clock=ManualClock(T0))


def test_open_then_unreplicated_then_stable(state: ProducerStateManager) -> None:
    state.update(header(1, 0, count=2))
    state.update(header(2, 2))
    state.update(header(1, 3))  # same transaction: its first offset stays 0
    assert state.ongoing_transactions() == {1: 0, 2: 2}
    done = state.update(marker(1, 4), marker=EndTxnMarker(True, 0))
    assert done == CompletedTxn(1, 0, 4, aborted=False)
    assert state.ongoing_transactions() == {2: 2}
    assert state.last_stable_offset(4) == 0  # the marker is not below the high watermark yet
    assert state.unreplicated_transactions() == (done,)
    assert state.last_stable_offset(5) == 2  # now it is: forgotten, b remains
    assert state.unreplicated_transactions() == ()
    state.update(marker(2, 5), marker=EndTxnMarker(False, 0))
    assert state.first_unstable_offset() == 2
    assert state.last_stable_offset(6) == 6 and state.first_unstable_offset() is None


def test_lso_recorded_with_an_abort_is_the_oldest_other_open_transaction(
    state: ProducerStateManager,
) -> None:
    state.update(header(1, 0))
    state.update(header(2, 1))
    state.update(header(3, 2))
    done = state.update(marker(2, 3), marker=EndTxnMarker(False, 0))
    assert done is not None and state.last_stable_offset_for(done) == 0
    done = state.update(marker(1, 4), marker=EndTxnMarker(False, 0))
    assert done is not None and state.last_stable_offset_for(done) == 2
    done = state.update(marker(3, 5), marker=EndTxnMarker(False, 0))
    assert done is not None and state.last_stable_offset_for(done) == 6


def test_a_marker_without_an_open_transaction_completes_nothing(
    state: ProducerStateManager,
) -> None:
    assert state.update(marker(1, 0, epoch=2), marker=EndTxnMarker(False, 3)) is None
    entry = state.last_entry(1)
    assert entry is not None and (entry.producer_epoch, entry.coordinator_epoch) == (2, 3)
    assert state.first_unstable_offset() is None


def test_an_empty_control_batch_changes_nothing_and_a_marker_is_required(
    state: ProducerStateManager,
) -> None:
    state.update(header(1, 0))
    emptied = header(1, 1, control=True, records=0)  # compaction removed its record
    assert state.update(emptied) is None
    assert state.ongoing_transactions() == {1: 0}
    with pytest.raises(ValueError, match="without its marker"):
        state.update(marker(1, 2))


def test_marker_checks(state: ProducerStateManager) -> None:
    state.check_marker(9, 0, EndTxnMarker(True, 0))  # unknown producer: accepted
    state.update(header(1, 0, epoch=3))
    state.check_marker(1, 3, EndTxnMarker(True, 0))  # no coordinator epoch seen yet
    state.update(marker(1, 1, epoch=3), marker=EndTxnMarker(True, 4))
    with pytest.raises(InvalidProducerEpochError):
        state.check_marker(1, 2, EndTxnMarker(True, 4))
    with pytest.raises(TransactionCoordinatorFencedError):
        state.check_marker(1, 3, EndTxnMarker(False, 3))
    state.check_marker(1, 4, EndTxnMarker(False, 4))


def test_snapshots_keep_open_transactions(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    state = ProducerStateManager(tmp_path, clock=clock, producer_id_expiration_ms=1000)
    state.update(header(1, 0))
    state.update(header(2, 1))
    state.update(marker(2, 2), marker=EndTxnMarker(True, 0))
    state.take_snapshot(3)
    clock.advance(5000)  # both idle for longer than the expiration
    reloaded = ProducerStateManager(tmp_path, clock=clock, producer_id_expiration_ms=1000)
    assert reloaded.load(0, 3) == 3
    assert reloaded.ongoing_transactions() == {1: 0}  # the open one is never expired
    assert reloaded.last_entry(2) is None
    assert reloaded.last_stable_offset(3) == 0
    reloaded.truncate_fully_and_start_at(10)
    assert reloaded.ongoing_transactions() == {} and reloaded.first_unstable_offset() is None


batch_specs = st.lists(
    st.tuples(
        st.sampled_from([1, 2, 3, -1]), st.sampled_from(["data", "plain", "commit", "abort"])
    ),
    max_size=30,
)


@settings(max_examples=100, deadline=None)
@given(batch_specs, batch_specs)
def test_aborted_by_predicts_what_the_updates_do(
    before: list[tuple[int, str]], append: list[tuple[int, str]]
) -> None:
    """The `.txnindex` entries computed before an append equal those the sequential updates
    (with Kafka's LSO rule) produce, for appends mixing producers, data and markers."""
    state = ProducerStateManager(Path("/nonexistent"), clock=ManualClock(T0))
    offset = 0
    for specs, record in ((before, False), (append, True)):
        headers, markers = [], {}
        for pid, kind in specs:
            if kind in ("commit", "abort"):
                markers[offset] = EndTxnMarker(kind == "commit", 0)
            headers.append(header(pid, offset, control=kind in ("commit", "abort"),
                                  transactional=kind != "plain"))  # fmt: skip
            offset += 1
        predicted = state.aborted_by(headers, markers) if record else []
        seen = []
        for h in headers:
            done = state.update(h, marker=markers.get(h.base_offset) if h.is_control else None)
            if done is not None and done.aborted:
                lso = state.last_stable_offset_for(done)
                seen.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset, lso))
        assert predicted == (seen if record else [])
