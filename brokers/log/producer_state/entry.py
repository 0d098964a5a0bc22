"""One producer id's state: its epoch and its last five batches (Kafka's `ProducerStateEntry`).

Owns: the sequence arithmetic (int32 wrap-around) and duplicate lookup over the retained batches.
Read-only for callers; only the manager mutates entries. Not thread-safe.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from brokers.records.batch import NO_SEQUENCE, BatchHeader

BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN (max.in.flight = 5)
NO_PRODUCER_EPOCH = -1
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is remembered of one appended batch (Kafka's BatchMetadata)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class DuplicateBatch:
    """The offsets a retried batch was originally written at."""

    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    """One producer id's state. Read-only for callers; only ProducerStateManager mutates it."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_sequence(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_seq == first and batch.last_seq == last:
                return batch
        return None

    def copy(self) -> ProducerStateEntry:
        batches = deque(self.batches, maxlen=BATCHES_TO_RETAIN)
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, batches, self.coordinator_epoch,
            self.last_timestamp, self.current_txn_first_offset,
        )  # fmt: skip


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Sequence arithmetic that wraps at int32 max like Kafka's DefaultRecordBatch."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)
