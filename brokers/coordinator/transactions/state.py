"""The transactional ids of the `__transaction_state` partitions this broker leads, and their writes.

Owns: `TxnPartition` (one loaded partition: its coordinator epoch — the partition's leader
epoch when it was elected — and its ids' metadata) and `TransactionLog`, Kafka's
TransactionStateManager: which partitions are served (`PartitionOwnership`: loading →
COORDINATOR_LOAD_IN_PROGRESS, not ours → NOT_COORDINATOR), `lookup`, and `write` — one record
per transition, appended acks=all and committed before the transition completes
(appendTransactionToLog). A `TxnPartition` object is replaced on every load, so "is it still the
current one" after an await is Kafka's coordinator-epoch check: leadership lost (and perhaps
regained) while a write was in flight answers NOT_COORDINATOR and never touches the new state.
Append errors map as Kafka's: not enough replicas / not committed in time → COORDINATOR_NOT_
AVAILABLE, lost leadership or a storage error → NOT_COORDINATOR, too large → UNKNOWN_SERVER_ERROR.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from brokers.common.clock import Clock
from brokers.coordinator.ownership import NO_EPOCH, PartitionOwnership
from brokers.coordinator.transactions.errors import (
    StateNotAvailableError,
    StateNotCoordinatorError,
    StateRecordTooLargeError,
)
from brokers.coordinator.transactions.loader import Loaded, load_partition
from brokers.coordinator.transactions.metadata import TransactionMetadata, TxnTransit
from brokers.coordinator.transactions.records import encode_key, encode_value
from brokers.coordinator.transactions.state_topic import StateTopic, partition_for
from brokers.records.builder import build_batch
from brokers.wire.errors import ErrorCode

log = logging.getLogger("pier.transactions")
Installed = Callable[["TxnPartition"], None]
Retry = Callable[[ErrorCode], bool]


@dataclass(eq=False, slots=True)
class TxnPartition:
    index: int
    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)


class TransactionLog:
    def __init__(
        self,
        topic: StateTopic,
        clock: Clock,
        *,
        on_installed: Installed,
        on_unloaded: Callable[[int], None],
        on_load_time: Callable[[float], None] | None = None,
    ) -> None:
        self.topic = topic
        self._clock = clock
        self._on_installed = on_installed
        self._on_unloaded = on_unloaded
        self._on_load_time = on_load_time
        self.partitions: dict[int, TxnPartition] = {}
        self.ownership: PartitionOwnership[Loaded] = PartitionOwnership(
            self._load, self._install, self._forget, name="transactions"
        )

    # ---- which partitions are ours --------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.topic.partition_count())

    def lookup(self, transactional_id: str) -> TxnPartition | ErrorCode:
        """The id's partition if this broker serves it; else the code to answer."""
        index = self.partition_for(transactional_id)
        if index in self.ownership.loading:
            return ErrorCode.coordinator_load_in_progress
        found = self.partitions.get(index)
        return ErrorCode.not_coordinator if found is None else found

    def is_current(self, entry: TxnPartition) -> bool:
        return self.partitions.get(entry.index) is entry

    def metadata(self) -> Iterator[tuple[TxnPartition, TransactionMetadata]]:
        """Every served id (a snapshot: callers may await between items)."""
        for entry in list(self.partitions.values()):
            for meta in list(entry.transactions.values()):
                yield entry, meta

    def metadata_with_prefix(self, prefix: str) -> list[TransactionMetadata]:
        """The served ids that start with `prefix` (tested on the keys before any entry is read)."""
        found: list[TransactionMetadata] = []
        for entry in self.partitions.values():
            transactions = entry.transactions
            found += [transactions[i] for i in [i for i in transactions if i.startswith(prefix)]]
        return found

    async def _load(self, index: int, epoch: int) -> Loaded:
        started = self._clock.monotonic()
        loaded = await load_partition(self.topic, index)
        if self._on_load_time is not None:
            self._on_load_time(self._clock.monotonic() - started)
        return loaded

    def _install(self, index: int, epoch: int, loaded: Loaded) -> None:
        # Standalone's term (NO_EPOCH) writes coordinator epoch 0, its partitions' leader epoch.
        coordinator_epoch = 0 if epoch == NO_EPOCH else epoch
        entry = TxnPartition(index, coordinator_epoch, loaded.transactions)
        self.partitions[index] = entry
        log.log(
            logging.INFO if entry.transactions else logging.DEBUG,
            "event=txn_partition_loaded partition=%d coordinator_epoch=%d transactional_ids=%d",
            index,
            coordinator_epoch,
            len(entry.transactions),
        )
        self._on_installed(entry)

    def _forget(self, index: int) -> None:
        gone = self.partitions.pop(index, None)
        self._on_unloaded(index)
        if gone is not None and gone.transactions:
            log.info(
                "event=txn_partition_unloaded partition=%d transactional_ids=%d",
                index,
                len(gone.transactions),
            )

    # ---- writes ---------------------------------------------------------------------------
    async def write(
        self,
        transactional_id: str,
        entry: TxnPartition,
        transit: TxnTransit,
        *,
        retry_on: Retry | None = None,
    ) -> ErrorCode:
        """Append `transit` and, once committed, complete it on the id's metadata. On an error
        the pending state is cleared (unless `retry_on` says the caller retries the write)."""
        record = (
            encode_key(transactional_id),
            encode_value(transit.log_value(), transit.log_version),
        )
        error = await self._append(entry, [record])
        meta = entry.transactions.get(transactional_id) if self.is_current(entry) else None
        if meta is None:  # unloaded (and perhaps loaded again) meanwhile: not ours to touch
            return ErrorCode.not_coordinator if error == ErrorCode.none else error
        if error == ErrorCode.none:
            meta.complete_transition(transit)
        elif retry_on is None or not retry_on(error):
            meta.pending_state = None
        return error

    async def write_tombstones(self, entry: TxnPartition, ids: Iterable[str]) -> ErrorCode:
        return await self._append(entry, [(encode_key(i), None) for i in ids])

    async def _append(
        self, entry: TxnPartition, records: list[tuple[bytes, bytes | None]]
    ) -> ErrorCode:
        if not self.is_current(entry):
            return ErrorCode.not_coordinator
        batch = build_batch(records, base_timestamp=self._clock.time_ms())
        try:
            await self.topic.append(entry.index, batch)
        except StateNotAvailableError as exc:
            log.info("event=txn_state_write_failed partition=%d error=%r", entry.index, exc)
            return ErrorCode.coordinator_not_available
        except StateNotCoordinatorError as exc:
            log.info("event=txn_state_write_failed partition=%d error=%r", entry.index, exc)
            return ErrorCode.not_coordinator
        except StateRecordTooLargeError as exc:
            log.error("event=txn_state_write_failed partition=%d error=%r", entry.index, exc)
            return ErrorCode.unknown_server_error
        return ErrorCode.none
