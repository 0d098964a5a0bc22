"""The checks a leader runs on a producer's batch before appending it (Kafka's `ProducerAppendInfo`).

Kafka 3.x/4.x behaviour mirrored:
- a duplicate is a batch of the current epoch whose (first, last) sequence equals one of the five
  cached batches; the append answers with the original offsets;
- same epoch: the first sequence must follow the last one (int32 wraps to 0), else
  OutOfOrderSequenceError; a newer epoch must start at sequence 0 (OutOfOrderSequenceError);
  an older epoch is fenced (InvalidProducerEpochError);
- an unknown producer id (or one with no epoch: its data was removed by retention or
  DeleteRecords) is accepted at any sequence: since KIP-360 brokers no longer answer
  UNKNOWN_PRODUCER_ID on produce;
- while the producer's transaction is being verified on the partition (`verification.py`), a
  first sequence above the lowest one sent to verification is out of order, known producer or
  not (Kafka's check against the VerificationStateEntry);
- a non-transactional batch while the producer's transaction is open -> InvalidTxnStateError.
  `current_txn_first_offset` is kept (and snapshotted): the LSO and the transaction index need it;
- an end-transaction marker (`check_marker`, written by the leader for the transaction
  coordinator): an older producer epoch -> InvalidProducerEpochError, an older coordinator epoch
  -> TransactionCoordinatorFencedError; it completes the open transaction, if any.
Pure functions over an entry; not thread-safe.
"""

from __future__ import annotations

from brokers.log.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from brokers.log.producer_state.entry import (
    NO_PRODUCER_EPOCH,
    BatchMetadata,
    DuplicateBatch,
    ProducerStateEntry,
    in_sequence,
)
from brokers.log.producer_state.transactions import CompletedTxn
from brokers.log.producer_state.verification import VerificationState
from brokers.records.batch import NO_SEQUENCE, BatchHeader
from brokers.records.control import EndTxnMarker


def check_batch(
    entry: ProducerStateEntry | None,
    header: BatchHeader,
    verifying: VerificationState | None = None,
) -> DuplicateBatch | None:
    has_sequence = not header.is_control and header.base_sequence != NO_SEQUENCE
    if entry is None:
        if has_sequence:
            check_verified_sequence(verifying, header)
        return None  # unknown producer: any sequence is accepted (KIP-360)
    duplicate = entry.find_duplicate(header) if has_sequence else None
    if duplicate is not None:
        return DuplicateBatch(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp)
    if header.producer_epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(
            f"producer {header.producer_id}: epoch {header.producer_epoch} is older than "
            f"the current epoch {entry.producer_epoch}"
        )
    if has_sequence:  # coordinator-written batches carry no sequence: epoch check only
        check_verified_sequence(verifying, header)
        check_sequence(entry, header)
    if entry.current_txn_first_offset is not None and not header.is_transactional:
        raise InvalidTxnStateError(
            f"producer {header.producer_id} has an open transaction; expected a transactional batch"
        )
    return None


def check_verified_sequence(verifying: VerificationState | None, header: BatchHeader) -> None:
    """A batch past the lowest sequence its transaction's verification saw waits for that one."""
    if verifying is not None and header.base_sequence > verifying.lowest_sequence:
        raise OutOfOrderSequenceError(
            f"producer {header.producer_id}: sequence {header.base_sequence} is above "
            f"{verifying.lowest_sequence}, the earliest sequence seen in verification"
        )


def check_sequence(entry: ProducerStateEntry, header: BatchHeader) -> None:
    first = header.base_sequence
    if header.producer_epoch != entry.producer_epoch:
        if first != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id}: new epoch {header.producer_epoch} must start at "
                f"sequence 0, got {first}"
            )
        return
    last = entry.last_sequence
    if entry.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(last, first):
        raise OutOfOrderSequenceError(
            f"producer {header.producer_id}: sequence {first} does not follow {last}"
        )


def check_marker(
    entry: ProducerStateEntry | None, producer_epoch: int, marker: EndTxnMarker
) -> None:
    """The leader's checks of an end-transaction marker (Kafka's appendEndTxnMarker, coordinator
    origin): an older producer epoch is fenced, so is an older coordinator epoch. A transaction
    version 2 marker (KIP-890 part 2: the coordinator bumped the epoch before writing it) must
    carry an epoch strictly above the producer's, as Kafka 4.2: an equal one is a late or
    duplicate marker. Markers carry no sequence; a producer with no open transaction (or unknown
    here) still gets its marker."""
    if entry is None:
        return
    strict = marker.transaction_version >= 2
    if producer_epoch < entry.producer_epoch or (strict and producer_epoch == entry.producer_epoch):
        relation = "not above" if strict else "older than"
        raise InvalidProducerEpochError(
            f"producer {entry.producer_id}: marker epoch {producer_epoch} is {relation} the "
            f"current epoch {entry.producer_epoch}"
        )
    if marker.coordinator_epoch < entry.coordinator_epoch:
        raise TransactionCoordinatorFencedError(
            f"producer {entry.producer_id}: coordinator epoch {marker.coordinator_epoch} is older "
            f"than {entry.coordinator_epoch}"
        )


def apply_batch(
    entry: ProducerStateEntry, header: BatchHeader, marker: EndTxnMarker | None
) -> CompletedTxn | None:
    """Fold a written batch into the entry (Kafka's ProducerAppendInfo + ProducerStateEntry);
    returns the transaction a marker completed (None for a marker with no open transaction).

    `marker` is the record of a control batch (data batches are never parsed); an empty control
    batch (its marker removed by compaction) changes nothing, as in Kafka."""
    if header.is_control:
        return _apply_marker(entry, header, marker)
    if header.producer_epoch != entry.producer_epoch:
        entry.batches.clear()  # a new epoch restarts the sequence space
        entry.producer_epoch = header.producer_epoch
    entry.last_timestamp = header.max_timestamp
    entry.batches.append(
        BatchMetadata(
            header.last_sequence, header.last_offset, header.last_offset_delta, header.max_timestamp
        )
    )
    if header.is_transactional and entry.current_txn_first_offset is None:
        entry.current_txn_first_offset = header.base_offset
    return None


def _apply_marker(
    entry: ProducerStateEntry, header: BatchHeader, marker: EndTxnMarker | None
) -> CompletedTxn | None:
    if marker is None:
        if header.records_count > 0:
            raise ValueError(f"control batch at {header.base_offset} applied without its marker")
        return None
    first = entry.current_txn_first_offset
    if header.producer_epoch != entry.producer_epoch:
        entry.batches.clear()
        entry.producer_epoch = header.producer_epoch
    entry.last_timestamp = header.max_timestamp
    entry.coordinator_epoch = marker.coordinator_epoch
    entry.current_txn_first_offset = None
    if first is None:
        return None  # nothing to complete: no effect on the LSO or the transaction index
    return CompletedTxn(entry.producer_id, first, header.last_offset, not marker.commit)
