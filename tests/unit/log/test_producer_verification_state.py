"""The leader's memory of a transaction's first batch while the coordinator is asked (KIP-890
part 1, Kafka's VerificationStateEntry): a later batch of the transaction cannot be written
ahead of the retried first one, known producer or not; a transaction-version-2 marker at the
verified epoch keeps it (the next transaction began verifying before the bumped marker
arrived); a written transactional batch, a final refusal or expiry ends it."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.errors import OutOfOrderSequenceError
from brokers.log.producer_state.manager import ProducerStateManager
from brokers.log.producer_state.verification import VerificationState
from brokers.records.batch import BatchHeader
from brokers.records.control import EndTxnMarker
from tests.unit.log.test_producer_state import HOUR_MS, T0, Partition, header

pytestmark = pytest.mark.unit
PID = 7


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(time_ms=T0)


@pytest.fixture
def log(tmp_path: Path, clock: ManualClock) -> Partition:
    return Partition(ProducerStateManager(tmp_path, clock=clock, producer_id_expiration_ms=HOUR_MS))


def txn(epoch: int, seq: int, count: int = 1) -> BatchHeader:
    return header(pid=PID, epoch=epoch, seq=seq, count=count, transactional=True)


def marker(log: Partition, epoch: int, *, tv2: bool) -> None:
    control = header(pid=PID, epoch=epoch, seq=-1, transactional=True, control=True)
    control = control._replace(base_offset=log.next_offset)
    log.next_offset = control.next_offset
    log.state.update(control, marker=EndTxnMarker(True, 0, transaction_version=2 if tv2 else 0))


def test_an_unknown_producers_later_batch_waits_for_the_retried_first_one(log: Partition) -> None:
    # The failure CI saw: the first batch (seq 0) was refused retriably while the coordinator
    # finished the previous transaction; the next request's batch (seq 148) was verified and,
    # the producer unknown here, written at any sequence; the retried seq 0 then never fit.
    log.state.start_verification(PID, 0, 1, supports_epoch_bump=True)
    with pytest.raises(OutOfOrderSequenceError, match="earliest sequence seen in verification"):
        log.state.check(txn(1, 148))
    assert log.state.last_entry(PID) is None, "nothing written"
    log.append(txn(1, 0, count=148))
    assert log.state.verification(PID) is None, "the transaction's first batch ends it"
    log.append(txn(1, 148))
    assert log.state.last_entry(PID).last_sequence == 148  # type: ignore[union-attr]


def test_a_tv2_marker_at_the_verified_epoch_keeps_the_bound(log: Partition) -> None:
    log.append(txn(1, 0, count=10))  # transaction k at epoch 1
    log.state.start_verification(PID, 0, 2, supports_epoch_bump=True)  # k+1, before the marker
    marker(log, 2, tv2=True)  # k's marker, written with the bumped epoch
    assert log.state.verification(PID) == VerificationState(2, 0, True, T0)
    with pytest.raises(OutOfOrderSequenceError):
        log.state.check(txn(2, 5))
    log.append(txn(2, 0, count=5))
    log.append(txn(2, 5))


def test_a_marker_ends_the_state_otherwise(log: Partition) -> None:
    log.append(txn(1, 0))
    log.state.start_verification(PID, 0, 1, supports_epoch_bump=False)
    marker(log, 1, tv2=False)
    assert log.state.verification(PID) is None
    log.state.start_verification(PID, 0, 3, supports_epoch_bump=True)
    marker(log, 2, tv2=True)  # a marker of another epoch than the one being verified
    assert log.state.verification(PID) is None


def test_the_lowest_sequence_and_a_newer_epoch_move_the_bound(log: Partition) -> None:
    log.state.start_verification(PID, 10, 1, supports_epoch_bump=True)
    log.state.start_verification(PID, 20, 1, supports_epoch_bump=True)
    log.state.start_verification(PID, 5, 1, supports_epoch_bump=True)
    assert log.state.verification(PID).lowest_sequence == 5  # type: ignore[union-attr]
    log.state.start_verification(PID, 30, 0, supports_epoch_bump=True)  # an older epoch: ignored
    assert log.state.verification(PID).lowest_sequence == 5  # type: ignore[union-attr]
    log.state.start_verification(PID, 30, 2, supports_epoch_bump=True)
    assert log.state.verification(PID) == VerificationState(2, 30, True, T0)


def test_a_plain_idempotent_batch_does_not_end_it(log: Partition) -> None:
    log.state.start_verification(PID, 0, 1, supports_epoch_bump=True)
    log.append(header(pid=PID, epoch=1, seq=0))  # accepted: not above the bound
    assert log.state.verification(PID) is not None
    with pytest.raises(OutOfOrderSequenceError):
        log.state.check(header(pid=PID, epoch=1, seq=1))


def test_batches_of_one_request_follow_the_first_transactional_one(log: Partition) -> None:
    log.state.start_verification(PID, 0, 1, supports_epoch_bump=True)
    assert log.state.check_all([txn(1, 0, count=3), txn(1, 3)]) == [None, None]
    with pytest.raises(OutOfOrderSequenceError):
        log.state.check_all([txn(1, 3), txn(1, 4)])


def test_a_final_refusal_and_expiry_forget_it(log: Partition, clock: ManualClock) -> None:
    log.state.start_verification(PID, 0, 1, supports_epoch_bump=True)
    log.state.end_verification(PID)
    assert log.state.check(txn(1, 9)) is None
    log.state.start_verification(PID, 0, 1, supports_epoch_bump=True)
    clock.advance(HOUR_MS - 1)
    log.state.remove_expired(clock.time_ms())
    assert log.state.verification(PID) is not None
    clock.advance(1)
    log.state.remove_expired(clock.time_ms())
    assert log.state.verification(PID) is None
