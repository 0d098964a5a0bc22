"""One transactional id's state and Kafka's transitions between states (TransactionMetadata).

Owns: `TxnState` (ids and names as Kafka's TransactionState, with each state's valid previous
states), `TxnTransit` (the target of a transition, written to `__transaction_state` before it
takes effect) and `TransactionMetadata`. A transition is two steps, as in Kafka: `prepare_*`
checks it, sets `pending_state` (which blocks any other transition meanwhile: callers answer
CONCURRENT_TRANSACTIONS) and returns the transit; once the record is committed,
`complete_transition` applies it after checking it is still consistent (a mismatch is a bug:
`IllegalTransitionError`). A failed write clears `pending_state` instead. Each transaction
records the client's `transaction.version` (`client_transaction_version`): under 0/1 the epoch is
bumped by InitProducerId and by fencing only; under 2 (KIP-890 part 2) every EndTxn bumps it too
(`prepare_abort_or_commit(..., bump_epoch=True)`: Prepare* carries epoch+1 and remembers the
client's epoch as `last_producer_epoch`, so a retried EndTxn is recognised), the markers are
written with the bumped epoch, and an exhausted epoch rotates to `next_producer_id` at epoch 0
when the transaction completes. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from brokers.coordinator.transactions.records import (
    FLEXIBLE_VALUE_VERSION,
    NO_PRODUCER_ID,
    VALUE_VERSION,
    TransactionLogValue,
    group_partitions,
)
from brokers.wire.errors import ErrorCode

NO_PRODUCER_EPOCH = -1
INT16_MAX = 2**15 - 1
TV_2 = 2  # transaction.version with an epoch bump per transaction (KIP-890 part 2)
TopicPartition = tuple[str, int]


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        """Kafka's name, as DescribeTransactions and ListTransactions show it."""
        return _LABELS[self]

    @classmethod
    def from_label(cls, label: str) -> TxnState | None:
        return _BY_LABEL.get(label)

    @property
    def expiration_allowed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


S = TxnState
_LABELS = {
    S.EMPTY: "Empty",
    S.ONGOING: "Ongoing",
    S.PREPARE_COMMIT: "PrepareCommit",
    S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit",
    S.COMPLETE_ABORT: "CompleteAbort",
    S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_LABEL = {label: state for state, label in _LABELS.items()}
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # TV2: a client may abort with no transaction open (it added no partition itself)
    S.PREPARE_ABORT: frozenset(
        {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    ),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransitionError(RuntimeError):
    """A transition Kafka's state machine does not allow: a coordinator bug, never user input."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps Short.MaxValue free so the coordinator can always fence a producer."""
    return epoch >= INT16_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The state a transition leads to (Kafka's TxnTransitMetadata)."""

    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    update_ms: int
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    @property
    def log_version(self) -> int:
        """Kafka writes the flexible value (with the tagged fields) for TV2 transactions."""
        return FLEXIBLE_VALUE_VERSION if self.client_transaction_version >= TV_2 else VALUE_VERSION

    def log_value(self) -> TransactionLogValue:
        empty = self.state is S.EMPTY
        if empty and self.partitions:
            raise IllegalTransitionError(f"an Empty transaction with partitions: {self}")
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms,
            status=int(self.state),
            partitions=None if empty else group_partitions(self.partitions),
            last_update_ms=self.update_ms,
            start_ms=self.start_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )


class TransactionMetadata:
    def __init__(
        self,
        transactional_id: str,
        *,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
        previous_producer_id: int = NO_PRODUCER_ID,
        timeout_ms: int,
        state: TxnState = S.EMPTY,
        partitions: Iterable[TopicPartition] = (),
        start_ms: int = -1,
        update_ms: int,
        next_producer_id: int = NO_PRODUCER_ID,
        client_transaction_version: int = 0,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.previous_producer_id = previous_producer_id
        self.timeout_ms = timeout_ms
        self.state = state
        self.partitions: set[TopicPartition] = set(partitions)
        self.start_ms = start_ms
        self.update_ms = update_ms
        self.next_producer_id = next_producer_id
        self.client_transaction_version = client_transaction_version
        self.pending_state: TxnState | None = None
        # A fence whose write failed already bumped the epoch in memory: do not bump it twice.
        self.has_failed_epoch_fence = False

    @classmethod
    def from_log(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        try:
            state = TxnState(value.status)
        except ValueError:
            raise IllegalTransitionError(f"unknown transaction status {value.status}") from None
        partitions = [] if state is S.EMPTY else _pairs(value.partitions or ())
        last_epoch = NO_PRODUCER_EPOCH
        ended = (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        if value.client_transaction_version >= TV_2 and state in ended and value.producer_epoch > 0:
            last_epoch = value.producer_epoch - 1  # the log keeps no last epoch: TV2 bumped it
        return cls(
            transactional_id,
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            last_producer_epoch=last_epoch,
            previous_producer_id=value.previous_producer_id,
            timeout_ms=value.timeout_ms,
            state=state,
            partitions=partitions,
            start_ms=value.start_ms,
            update_ms=value.last_update_ms,
            next_producer_id=value.next_producer_id,
            client_transaction_version=value.client_transaction_version,
        )

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata({self.transactional_id!r}, producer_id={self.producer_id}, "
            f"epoch={self.producer_epoch}, last_epoch={self.last_producer_epoch}, "
            f"state={self.state.label}, pending={self.pending_state}, "
            f"tv={self.client_transaction_version}, "
            f"partitions={sorted(self.partitions)})"
        )

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def bumps_epoch_per_transaction(self) -> bool:
        return self.client_transaction_version >= TV_2

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    # ---- preparing transitions ------------------------------------------------------------
    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """Ongoing → PrepareEpochFence with the epoch bumped (timeouts, a new producer)."""
        if self.producer_epoch == INT16_MAX:
            raise IllegalTransitionError("cannot fence a producer at epoch Short.MaxValue")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH, self.timeout_ms,
            frozenset(self.partitions), self.start_ms, self.update_ms,
        )  # fmt: skip

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | ErrorCode:
        """InitProducerId on an idle id: bump the epoch (KIP-360: `expected_epoch` is the
        caller's; a retry of a bump it never heard back from gets the same epoch again)."""
        if self.epoch_exhausted:
            raise IllegalTransitionError(f"epochs of producer id {self.producer_id} exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.producer_fenced
        return self._prepare(
            S.EMPTY, self.producer_id, epoch, last, timeout_ms, frozenset(), -1, now_ms
        )

    def prepare_producer_id_rotation(
        self, producer_id: int, timeout_ms: int, now_ms: int, *, record_last_epoch: bool
    ) -> TxnTransit:
        if self.has_pending_transaction:
            raise IllegalTransitionError("cannot rotate producer ids in a transaction")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(S.EMPTY, producer_id, 0, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(
        self, partitions: Iterable[TopicPartition], now_ms: int, client_version: int = 0
    ) -> TxnTransit:
        """Start or extend the transaction; a starting one records the client's TV."""
        starting = self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
        version = client_version if starting else self.client_transaction_version
        return self._prepare(
            S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
            self.timeout_ms, frozenset(self.partitions.union(partitions)),
            now_ms if starting else self.start_ms, now_ms, client_version=version,
        )  # fmt: skip

    def prepare_abort_or_commit(
        self,
        commit: bool,
        now_ms: int,
        *,
        bump_epoch: bool = False,
        next_producer_id: int = NO_PRODUCER_ID,
    ) -> TxnTransit:
        """Prepare* of the transaction. With `bump_epoch` (a TV2 EndTxn) the epoch is bumped and
        the client's remembered; a transaction with no partition (a TV2 abort of nothing)
        starts now. `next_producer_id`: the id to rotate to once complete (epochs exhausted)."""
        state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        epoch, last = self.producer_epoch, self.last_producer_epoch
        version = self.client_transaction_version
        if bump_epoch:
            epoch, last, version = self.producer_epoch + 1, self.producer_epoch, TV_2
        start_ms = self.start_ms if self.state is S.ONGOING else now_ms
        return self._prepare(
            state, self.producer_id, epoch, last, self.timeout_ms, frozenset(self.partitions),
            start_ms, now_ms, next_producer_id=next_producer_id, client_version=version,
        )  # fmt: skip

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False  # the fence reached the log
        if not self.bumps_epoch_per_transaction:
            return self._prepare(
                state, self.producer_id, self.producer_epoch, self.producer_epoch,
                self.timeout_ms, frozenset(), self.start_ms, now_ms,
            )  # fmt: skip
        # TV2 keeps the client's last epoch (a retried EndTxn names it); an exhausted epoch
        # rotates to the next producer id at epoch 0 (the client sees MAX-1, then 0).
        producer_id, epoch = self.producer_id, self.producer_epoch
        if self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0
        return self._prepare(
            state, producer_id, epoch, self.last_producer_epoch, self.timeout_ms, frozenset(),
            self.start_ms, now_ms, client_version=self.client_transaction_version,
        )  # fmt: skip

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(
            S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
            self.timeout_ms, frozenset(), self.start_ms, self.update_ms,
        )  # fmt: skip

    def _prepare(
        self,
        state: TxnState,
        producer_id: int,
        epoch: int,
        last_epoch: int,
        timeout_ms: int,
        partitions: frozenset[TopicPartition],
        start_ms: int,
        update_ms: int,
        *,
        next_producer_id: int = NO_PRODUCER_ID,
        client_version: int | None = None,
    ) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"{self!r}: transition to {state.label} while {self.pending_state.label} pends"
            )
        if producer_id < 0:
            raise IllegalTransitionError(f"illegal producer id {producer_id}")
        if state is not S.DEAD and epoch < 0:
            raise IllegalTransitionError(f"illegal producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransitionError(f"{self!r}: no transition to {state.label}")
        self.pending_state = state
        version = self.client_transaction_version if client_version is None else client_version
        previous = (
            self.producer_id if producer_id != self.producer_id else self.previous_producer_id
        )
        if state is S.EMPTY:  # InitProducerId: Kafka records the id it replaces (or none)
            previous = self.producer_id
        return TxnTransit(
            producer_id, previous, epoch, last_epoch, timeout_ms, state, partitions,
            start_ms, update_ms, next_producer_id, version,
        )  # fmt: skip

    # ---- completing them ------------------------------------------------------------------
    def complete_transition(self, transit: TxnTransit) -> None:
        """Apply `transit` once its record is committed (Kafka's completeTransitionTo)."""
        if self.pending_state is not transit.state:
            self._refuse(transit)
        state = transit.state
        if state is S.EMPTY:
            self._complete_init(transit)
        elif state is S.ONGOING:
            if not self._same_producer(transit) or not self.partitions <= transit.partitions:
                self._refuse(transit)
            if self.timeout_ms != transit.timeout_ms:
                self._refuse(transit)
            self.start_ms = transit.start_ms
            self.partitions |= transit.partitions
            self.client_transaction_version = transit.client_transaction_version
        elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            self._complete_prepare(transit)
        elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            self._complete_end(transit)
        else:  # PrepareEpochFence and Dead are never completed (Kafka neither)
            self._refuse(transit)
        self.update_ms = transit.update_ms
        self.pending_state = None
        self.state = state

    def _complete_prepare(self, transit: TxnTransit) -> None:
        bumped = transit.client_transaction_version >= TV_2 and (
            transit.producer_epoch == self.producer_epoch + 1
        )
        if transit.producer_id != self.producer_id or self.timeout_ms != transit.timeout_ms:
            self._refuse(transit)
        if transit.producer_epoch != self.producer_epoch and not bumped:
            self._refuse(transit)
        if self.partitions != transit.partitions:
            self._refuse(transit)
        if self.state is S.ONGOING and self.start_ms != transit.start_ms:
            self._refuse(transit)
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.next_producer_id = transit.next_producer_id
        self.client_transaction_version = transit.client_transaction_version
        self.start_ms = transit.start_ms

    def _complete_end(self, transit: TxnTransit) -> None:
        rotated = (
            transit.producer_id == self.next_producer_id != NO_PRODUCER_ID
            and transit.producer_epoch == 0
        )
        if not self._same_producer(transit) and not rotated:
            self._refuse(transit)
        if self.timeout_ms != transit.timeout_ms or transit.start_ms == -1:
            self._refuse(transit)
        if rotated:
            self.previous_producer_id = self.producer_id
            self.producer_id, self.producer_epoch = transit.producer_id, 0
        self.next_producer_id = NO_PRODUCER_ID
        if transit.client_transaction_version >= TV_2:
            self.last_producer_epoch = transit.last_producer_epoch
        self.start_ms = transit.start_ms
        self.partitions.clear()

    def _complete_init(self, transit: TxnTransit) -> None:
        bumped = transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )
        if transit.producer_epoch != self.producer_epoch and not bumped:
            self._refuse(transit)
        if transit.partitions or transit.start_ms != -1:
            self._refuse(transit)
        self.timeout_ms = transit.timeout_ms
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id

    def _same_producer(self, transit: TxnTransit) -> bool:
        return (transit.producer_id, transit.producer_epoch) == (
            self.producer_id,
            self.producer_epoch,
        )

    def _refuse(self, transit: TxnTransit) -> None:
        raise IllegalTransitionError(f"{self!r} cannot complete the transition to {transit}")


def _pairs(partitions: Iterable[tuple[str, Iterable[int]]]) -> list[TopicPartition]:
    return [(topic, partition) for topic, ids in partitions for partition in ids]
