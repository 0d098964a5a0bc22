"""The transaction coordinator: the client-facing operations on transactional ids (KIP-98).

Owns: `TransactionCoordinator` — InitProducerId (new id → Empty at epoch 0; an idle id gets its
epoch bumped; an Ongoing one is fenced: its transaction is aborted under a bumped epoch and the
caller told CONCURRENT_TRANSACTIONS, so its retry bumps again; exhausted epochs rotate the
producer id; KIP-360 retries with the caller's producer id and epoch), AddPartitionsToTxn (and
KIP-890's verify-only form), AddOffsetsToTxn, EndTxn (PrepareCommit/PrepareAbort committed to
`__transaction_state`, the answer, then markers and Complete* in the background through
`TxnCompletion`; under `transaction.version` 2, KIP-890 part 2, the epoch is bumped by every
EndTxn, the answer carries the new producer id and epoch, a retried EndTxn of the previous
epoch is answered as the first one was, and a client may abort when it has added no partition),
DescribeTransactions, ListTransactions, leadership (`on_election` /
`on_resignation` through `TransactionLog`; transactions found in Prepare* after a load are
finished), and housekeeping: `abort_timed_out` (Kafka's abortTimedOutTransactions: fence with a
bumped epoch, then abort, so a stale producer of the transaction is refused) and `expire_ids`
(transactional.id.expiration.ms: tombstones for ids idle that long).
Epochs are checked strictly (a client's EndTxn must carry the current epoch): a delayed EndTxn of
an older epoch can never end a later transaction (the KAFKA-17754 hazard). Results are Kafka
error codes; PRODUCER_FENCED is mapped to INVALID_PRODUCER_EPOCH for old request versions by
the handlers. Each operation checks and prepares its transition without awaiting, so no other
request sees a half-made decision; the only awaits are the state writes.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from brokers.common.clock import Clock
from brokers.coordinator.offsets_topic import OFFSETS_TOPIC
from brokers.coordinator.ownership import NO_EPOCH
from brokers.coordinator.transactions.completion import TxnCompletion
from brokers.coordinator.transactions.config import TransactionConfig
from brokers.coordinator.transactions.expiry import expire_ids
from brokers.coordinator.transactions.markers import MarkerSender
from brokers.coordinator.transactions.metadata import (
    NO_PRODUCER_EPOCH,
    TV_2,
    IllegalTransitionError,
    TransactionMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
)
from brokers.coordinator.transactions.records import NO_PRODUCER_ID
from brokers.coordinator.transactions.state import TransactionLog, TxnPartition
from brokers.coordinator.transactions.state_topic import StateTopic
from brokers.coordinator.transactions.stats import TxnStats
from brokers.coordinator.transactions.views import (
    DescribedTransaction,
    TransactionListing,
    describe,
    list_transactions,
)
from brokers.wire.errors import ErrorCode

log = logging.getLogger("pier.transactions")
S = TxnState
TopicPartition = tuple[str, int]
InitResult = tuple[ErrorCode, int, int]
EndResult = tuple[ErrorCode, int, int]  # the error, then (TV2) the producer id and epoch to use


class ProducerIds(Protocol):
    def next_producer_id(self) -> int: ...


@dataclass(slots=True)
class _Ending:
    """An EndTxn whose Prepare* transition is prepared and must now be written."""

    transactional_id: str
    entry: TxnPartition
    meta: TransactionMetadata
    transit: TxnTransit
    fencing: bool

    @property
    def producer_id(self) -> int:
        """The producer id the client uses next (TV2: a new one once epochs ran out)."""
        if self.transit.next_producer_id != NO_PRODUCER_ID:
            return self.transit.next_producer_id
        return self.transit.producer_id

    @property
    def producer_epoch(self) -> int:
        return 0 if self.transit.next_producer_id != NO_PRODUCER_ID else self.transit.producer_epoch


class TransactionCoordinator:
    def __init__(
        self,
        config: TransactionConfig,
        topic: StateTopic,
        clock: Clock,
        *,
        producer_ids: ProducerIds,
        markers: MarkerSender,
        group_partition: Callable[[str], int],
        partition_exists: Callable[[str, int], bool],
    ) -> None:
        self.config = config
        self.clock = clock
        self.stats = TxnStats()
        self._producer_ids = producer_ids
        self._group_partition = group_partition
        self._partition_exists = partition_exists
        self.state = TransactionLog(
            topic,
            clock,
            on_installed=self._installed,
            on_unloaded=self._unloaded,
            on_load_time=self.stats.loaded,
        )
        self.completion = TxnCompletion(self.state, markers, on_completed=self.stats.completed)
        self.ownership = self.state.ownership
        self.active = True

    # ---- leadership of __transaction_state partitions -------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return self.state.partition_for(transactional_id)

    async def load_partitions(self, partitions: Iterable[int]) -> None:
        """Become coordinator of `partitions` for good (standalone): read back, then serve."""
        loads = [self.state.ownership.elect(p, NO_EPOCH) for p in partitions]
        tasks = [task for task in loads if task is not None]
        if tasks:
            await asyncio.wait(tasks)

    async def wait_loaded(self) -> None:
        """Until no partition load is running (loads started meanwhile included)."""
        await self.ownership.wait_loaded()

    def on_election(self, partition: int, leader_epoch: int) -> None:
        self.state.ownership.elect(partition, leader_epoch)

    def on_resignation(self, partition: int, leader_epoch: int | None = None) -> None:
        self.state.ownership.resign(partition, leader_epoch)

    def _installed(self, entry: TxnPartition) -> None:
        """Kafka's load: transactions left in PrepareCommit/PrepareAbort are finished now."""
        now = self.clock.time_ms()
        for transactional_id, meta in entry.transactions.items():
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and not meta.pending:
                log.info(
                    "event=txn_resume_markers transactional_id=%s state=%s",
                    transactional_id,
                    meta.state.label,
                )
                self.completion.start(transactional_id, entry, meta, meta.prepare_complete(now))

    def _unloaded(self, index: int) -> None:
        self.completion.cancel_partition(index)

    async def shutdown(self) -> None:
        self.active = False
        await self.state.ownership.close()
        await self.completion.close()

    # ---- InitProducerId -------------------------------------------------------------------
    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitResult:
        try:
            return await self._init(transactional_id, timeout_ms, producer_id, producer_epoch)
        except IllegalTransitionError as exc:
            log.error(
                "event=txn_illegal_transition transactional_id=%s error=%s", transactional_id, exc
            )
            return _failed(ErrorCode.unknown_server_error)

    async def _init(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> InitResult:
        if not transactional_id:
            return _failed(ErrorCode.invalid_request)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return _failed(ErrorCode.invalid_transaction_timeout)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return _failed(ErrorCode.invalid_request)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        found = self.state.lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return _failed(found)
        meta = found.transactions.get(transactional_id)
        if meta is None:
            new_id = self._next_producer_id()
            if new_id is None:
                return _failed(ErrorCode.coordinator_not_available)
            meta = TransactionMetadata(
                transactional_id,
                producer_id=new_id,
                timeout_ms=timeout_ms,
                update_ms=self.clock.time_ms(),
            )
            found.transactions[transactional_id] = meta
        prepared = self._prepare_init(meta, timeout_ms, expected)
        if isinstance(prepared, ErrorCode):
            return _failed(prepared)
        if prepared.state is S.PREPARE_EPOCH_FENCE:
            # Abort the open transaction under the bumped epoch; the caller retries and its
            # retry bumps the epoch again (that epoch is never handed out).
            ending = self._prepare_end(
                transactional_id, prepared.producer_id, prepared.producer_epoch, False, False
            )
            if not isinstance(ending, _Ending):  # cannot happen: checked above, nothing awaited
                meta.pending_state = None
                return _failed(ending if isinstance(ending, ErrorCode) else ending[0])
            error = await self._finish_end(ending)
            return _failed(ErrorCode.concurrent_transactions if error == ErrorCode.none else error)
        error = await self.state.write(transactional_id, found, prepared)
        if error != ErrorCode.none:
            return _failed(error)
        log.info(
            "event=txn_producer_initialized transactional_id=%s producer_id=%d epoch=%d "
            "partition=%d",
            transactional_id, prepared.producer_id, prepared.producer_epoch, found.index,
        )  # fmt: skip
        return ErrorCode.none, prepared.producer_id, prepared.producer_epoch

    def _prepare_init(
        self,
        meta: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
    ) -> TxnTransit | ErrorCode:
        if meta.pending:
            return ErrorCode.concurrent_transactions
        if expected is not None and not _valid_producer_id(meta, *expected):
            return ErrorCode.producer_fenced
        state = meta.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return ErrorCode.concurrent_transactions
        if state is S.ONGOING:
            return meta.prepare_fence_producer_epoch()
        if state not in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            raise IllegalTransitionError(f"{meta!r} found in state {state.label}")
        now = self.clock.time_ms()
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            new_id = self._next_producer_id()
            if new_id is None:
                return ErrorCode.coordinator_not_available
            return meta.prepare_producer_id_rotation(
                new_id, timeout_ms, now, record_last_epoch=expected is not None
            )
        expected_epoch = None if expected is None else expected[1]
        return meta.prepare_increment_producer_epoch(timeout_ms, expected_epoch, now)

    def _next_producer_id(self) -> int | None:
        try:
            return self._producer_ids.next_producer_id()
        except Exception as exc:  # e.g. ZooKeeper unreachable: the client retries
            log.warning("event=txn_producer_id_unavailable error=%r", exc)
            return None

    # ---- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------
    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        *,
        verify_only: bool = False,
        client_version: int = 0,
    ) -> dict[TopicPartition, ErrorCode]:
        """Add `partitions` to the producer's transaction (or, `verify_only`, check they are in
        it). `client_version` 2: a partition leader adding them for a TV2 producer (KIP-890
        part 2: the producer sends no AddPartitionsToTxn of its own)."""
        wanted = list(dict.fromkeys(partitions))
        if not transactional_id:
            return dict.fromkeys(wanted, ErrorCode.invalid_request)
        unknown = {tp for tp in wanted if not self._partition_exists(*tp)}
        if unknown:  # the whole request fails; the others were not attempted (Kafka)
            return {
                tp: ErrorCode.unknown_topic_or_partition
                if tp in unknown
                else ErrorCode.operation_not_attempted
                for tp in wanted
            }
        if verify_only:
            return self._verify(transactional_id, producer_id, producer_epoch, wanted)
        error = await self._add(
            transactional_id, producer_id, producer_epoch, wanted, client_version
        )
        return dict.fromkeys(wanted, error)

    async def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        client_version: int = 0,
    ) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.invalid_request
        offsets_partition = (OFFSETS_TOPIC, self._group_partition(group_id))
        return await self._add(
            transactional_id, producer_id, producer_epoch, [offsets_partition], client_version
        )

    async def _add(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Collection[TopicPartition],
        client_version: int = 0,
    ) -> ErrorCode:
        found = self.state.lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return found
        meta = found.transactions.get(transactional_id)
        error = _check_producer(meta, producer_id, producer_epoch)
        if error is not None or meta is None:
            return error or ErrorCode.invalid_producer_id_mapping
        if meta.pending or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.concurrent_transactions
        if meta.state is S.ONGOING and meta.partitions.issuperset(partitions):
            return ErrorCode.none  # already in the transaction: nothing to write
        try:
            transit = meta.prepare_add_partitions(partitions, self.clock.time_ms(), client_version)
        except IllegalTransitionError as exc:
            log.error(
                "event=txn_illegal_transition transactional_id=%s error=%s", transactional_id, exc
            )
            return ErrorCode.unknown_server_error
        return await self.state.write(transactional_id, found, transit)

    def _verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1 (AddPartitionsToTxn v4 verify_only, from partition leaders): is each
        partition in the producer's ongoing transaction? Pending states are not checked: the
        leader's append checks the epoch again."""
        found = self.state.lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(partitions, found)
        meta = found.transactions.get(transactional_id)
        error = _check_producer(meta, producer_id, producer_epoch)
        if error is None and meta is not None and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            error = ErrorCode.concurrent_transactions
        if error is not None or meta is None:
            return dict.fromkeys(partitions, error or ErrorCode.invalid_producer_id_mapping)
        return {
            tp: ErrorCode.none if tp in meta.partitions else ErrorCode.transaction_abortable
            for tp in partitions
        }

    # ---- EndTxn ---------------------------------------------------------------------------
    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        """EndTxn of a TV0/1 client (v0–4): the error only."""
        result = await self.end_transaction(transactional_id, producer_id, producer_epoch, commit)
        return result[0]

    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_version: int = 0,
    ) -> EndResult:
        """EndTxn; `client_version` 2 for EndTxn v5+ (an epoch bump per transaction): then the
        result names the producer id and epoch the client continues with."""
        try:
            ending = self._prepare_end(
                transactional_id, producer_id, producer_epoch, commit, True, client_version
            )
        except IllegalTransitionError as exc:
            log.error(
                "event=txn_illegal_transition transactional_id=%s error=%s", transactional_id, exc
            )
            return _failed(ErrorCode.unknown_server_error)
        if isinstance(ending, tuple):
            return ending
        if isinstance(ending, ErrorCode):
            return _failed(ending)
        error = await self._finish_end(ending)
        if error != ErrorCode.none:
            return _failed(error)
        return error, ending.producer_id, ending.producer_epoch

    def _prepare_end(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        client_version: int = 0,
    ) -> _Ending | ErrorCode | EndResult:
        """Check an EndTxn and prepare its Prepare* transition (no await: see the module doc).
        An EndResult: a TV2 retry answered at once."""
        if not transactional_id:
            return ErrorCode.invalid_request
        found = self.state.lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return found
        meta = found.transactions.get(transactional_id)
        tv2 = from_client and client_version >= TV_2
        if tv2 and meta is not None and _is_tv2_retry(meta, producer_id, producer_epoch):
            return _tv2_retry(meta, commit)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        # A client must name the current epoch; the coordinator's own abort (a fence) names
        # the bumped one, which is at least the current one.
        if (from_client and producer_epoch != meta.producer_epoch) or (
            producer_epoch < meta.producer_epoch
        ):
            return ErrorCode.producer_fenced
        fencing = meta.pending_state is S.PREPARE_EPOCH_FENCE
        if meta.pending and (from_client or not fencing):
            return ErrorCode.concurrent_transactions
        outcome = _end_in_state(meta.state, commit, tv2)
        if outcome is not None:
            return outcome
        if fencing:  # Kafka: the fence becomes a PrepareAbort under the bumped epoch
            meta.pending_state = None
            meta.producer_epoch = producer_epoch
            meta.last_producer_epoch = NO_PRODUCER_EPOCH
        next_id = NO_PRODUCER_ID
        if tv2 and meta.epoch_exhausted:  # bump to MAX for the markers, then a new id
            allocated = self._next_producer_id()
            if allocated is None:
                return ErrorCode.coordinator_not_available
            next_id = allocated
        transit = meta.prepare_abort_or_commit(
            commit, self.clock.time_ms(), bump_epoch=tv2, next_producer_id=next_id
        )
        return _Ending(transactional_id, found, meta, transit, fencing)

    async def _finish_end(self, ending: _Ending) -> ErrorCode:
        """Write the Prepare* record; once committed, answer and finish in the background."""
        tid, entry, meta = ending.transactional_id, ending.entry, ending.meta
        error = await self.state.write(tid, entry, ending.transit)
        if error != ErrorCode.none:
            if ending.fencing and self.state.is_current(entry):
                meta.has_failed_epoch_fence = True  # the bumped epoch was never handed out
            log.info("event=txn_end_not_written transactional_id=%s error=%s", tid, error.name)
            return error
        if not self.state.is_current(entry) or entry.transactions.get(tid) is not meta:
            return ErrorCode.not_coordinator
        if meta.pending:
            return ErrorCode.concurrent_transactions
        if meta.state is not ending.transit.state:
            return ErrorCode.invalid_txn_state
        self.completion.start(tid, entry, meta, meta.prepare_complete(self.clock.time_ms()))
        return ErrorCode.none

    # ---- DescribeTransactions / ListTransactions ------------------------------------------
    def describe(self, transactional_id: str) -> DescribedTransaction:
        return describe(self.state, transactional_id, active=self.active)

    def list_transactions(
        self,
        states: Collection[str] = (),
        producer_ids: Collection[int] = (),
        duration_filter_ms: int = -1,
        prefix: str = "",
    ) -> TransactionListing:
        return list_transactions(
            self.state,
            self.clock.time_ms(),
            active=self.active,
            states=states,
            producer_ids=producer_ids,
            duration_filter_ms=duration_filter_ms,
            prefix=prefix,
        )

    # ---- housekeeping ---------------------------------------------------------------------
    async def abort_timed_out(self) -> int:
        """Abort Ongoing transactions older than their timeout, fencing their producer (the
        epoch is bumped). Returns how many aborts were started."""
        now = self.clock.time_ms()
        endings = [
            ending
            for _, meta in self.state.metadata()
            if not meta.pending
            and meta.state is S.ONGOING
            and meta.start_ms + meta.timeout_ms < now
            and (ending := self._fence_timed_out(meta)) is not None
        ]
        results = await asyncio.gather(
            *(self._finish_end(e) for e in endings), return_exceptions=True
        )
        for ending, result in zip(endings, results, strict=True):
            if isinstance(result, BaseException):
                log.error(
                    "event=txn_timeout_abort_failed transactional_id=%s error=%r",
                    ending.transactional_id,
                    result,
                )
            elif result == ErrorCode.none:
                self.stats.timed_out += 1
        return len(endings)

    def _fence_timed_out(self, meta: TransactionMetadata) -> _Ending | None:
        try:
            fence = meta.prepare_fence_producer_epoch()
            ending = self._prepare_end(
                meta.transactional_id, fence.producer_id, fence.producer_epoch, False, False
            )
        except IllegalTransitionError as exc:
            log.error("event=txn_illegal_transition transactional_id=%s error=%s",
                      meta.transactional_id, exc)  # fmt: skip
            return None
        if not isinstance(ending, _Ending):  # cannot happen: checked above, nothing awaited
            meta.pending_state = None
            return None
        log.info(
            "event=txn_timed_out transactional_id=%s producer_id=%d new_epoch=%d timeout_ms=%d",
            meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.timeout_ms,
        )  # fmt: skip
        return ending

    async def expire_ids(self) -> int:
        """Forget ids idle for `transactional.id.expiration.ms`; returns how many."""
        return await expire_ids(self.state, self.clock.time_ms(), self.config.id_expiration_ms)


def _failed(error: ErrorCode) -> InitResult:
    return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH


def _valid_producer_id(meta: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """KIP-360: may the caller's producer id and epoch bump this id's epoch? Yes for a
    just-created id, the current producer id, or the previous one when its epochs ran out (a
    retry of the rotation whose answer was lost)."""
    return (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == meta.producer_id
        or (producer_id == meta.previous_producer_id and is_epoch_exhausted(epoch))
    )


def _check_producer(
    meta: TransactionMetadata | None, producer_id: int, producer_epoch: int
) -> ErrorCode | None:
    if meta is None or meta.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if meta.producer_epoch != producer_epoch:
        return ErrorCode.producer_fenced
    return None


def _end_in_state(state: TxnState, commit: bool, tv2: bool = False) -> ErrorCode | None:
    """The answer to an EndTxn in `state`, or None to go ahead (Ongoing; TV2: an abort with no
    transaction open, which still bumps the epoch)."""
    if state is S.ONGOING:
        return None
    if tv2 and not commit and state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return None
    same = {
        S.COMPLETE_COMMIT: (commit, ErrorCode.none),
        S.COMPLETE_ABORT: (not commit, ErrorCode.none),
        S.PREPARE_COMMIT: (commit, ErrorCode.concurrent_transactions),
        S.PREPARE_ABORT: (not commit, ErrorCode.concurrent_transactions),
    }.get(state)
    if same is not None:
        matches, answer = same
        return answer if matches else ErrorCode.invalid_txn_state
    if state is S.EMPTY:
        return ErrorCode.invalid_txn_state
    raise IllegalTransitionError(f"EndTxn found a transaction in state {state.label}")


def _is_tv2_retry(meta: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """A TV2 EndTxn of the epoch this transaction's end bumped (its answer was lost)."""
    if not meta.bumps_epoch_per_transaction or producer_epoch == NO_PRODUCER_EPOCH:
        return False
    if meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return False
    same_id = producer_id == meta.producer_id or (
        producer_id == meta.previous_producer_id != NO_PRODUCER_ID
    )
    return same_id and producer_epoch == meta.last_producer_epoch


def _tv2_retry(meta: TransactionMetadata, commit: bool) -> EndResult | ErrorCode:
    ended = {S.COMPLETE_COMMIT: True, S.COMPLETE_ABORT: False}.get(meta.state)
    if ended is None:  # Prepare*: still writing markers
        preparing_commit = meta.state is S.PREPARE_COMMIT
        return (
            ErrorCode.concurrent_transactions
            if preparing_commit == commit
            else (ErrorCode.invalid_txn_state)
        )
    if ended != commit:
        return ErrorCode.invalid_txn_state
    return ErrorCode.none, meta.producer_id, meta.producer_epoch
