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
- a non-transactional batch while the producer's transaction is open -> InvalidTxnStateError.
  `current_txn_first_offset` is kept (and snapshotted) for the transaction coordinator.
Pure functions over an entry; not thread-safe.
"""

from __future__ import annotations

from brokers.log.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from brokers.log.producer_state.entry import (
    NO_PRODUCER_EPOCH,
    BatchMetadata,
    DuplicateBatch,
    ProducerStateEntry,
    in_sequence,
)
from brokers.records.batch import NO_SEQUENCE, BatchHeader


def check_batch(entry: ProducerStateEntry | None, header: BatchHeader) -> DuplicateBatch | None:
    if entry is None:
        return None  # unknown producer: any sequence is accepted (KIP-360)
    has_sequence = not header.is_control and header.base_sequence != NO_SEQUENCE
    duplicate = entry.find_duplicate(header) if has_sequence else None
    if duplicate is not None:
        return DuplicateBatch(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp)
    if header.producer_epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(
            f"producer {header.producer_id}: epoch {header.producer_epoch} is older than "
            f"the current epoch {entry.producer_epoch}"
        )
    if has_sequence:  # coordinator-written batches carry no sequence: epoch check only
        check_sequence(entry, header)
    if entry.current_txn_first_offset is not None and not header.is_transactional:
        raise InvalidTxnStateError(
            f"producer {header.producer_id} has an open transaction; expected a transactional batch"
        )
    return None


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


def apply_batch(
    entry: ProducerStateEntry, header: BatchHeader, coordinator_epoch: int | None
) -> None:
    """Fold a written batch into the entry (Kafka's ProducerAppendInfo + ProducerStateEntry)."""
    if header.producer_epoch != entry.producer_epoch:
        entry.batches.clear()  # a new epoch restarts the sequence space
        entry.producer_epoch = header.producer_epoch
    entry.last_timestamp = header.max_timestamp
    if header.is_control:
        # An end-transaction marker closes the open transaction (its records are not parsed here).
        entry.current_txn_first_offset = None
        if coordinator_epoch is not None:
            entry.coordinator_epoch = coordinator_epoch
        return
    entry.batches.append(
        BatchMetadata(
            header.last_sequence, header.last_offset, header.last_offset_delta, header.max_timestamp
        )
    )
    if header.is_transactional and entry.current_txn_first_offset is None:
        entry.current_txn_first_offset = header.base_offset
