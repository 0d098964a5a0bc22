"""Finishing a transaction once its PrepareCommit/PrepareAbort is in the log: markers, then Complete*.

Owns: `TxnCompletion` — one background task per transactional id (Kafka's
TransactionMarkerChannelManager.addTxnMarkersToSend → writeTxnCompletion): send the COMMIT/ABORT
marker to every partition of the transaction through the `MarkerSender`, with the coordinator
epoch of the partition's load; then write CompleteCommit/CompleteAbort, retrying while the state
topic answers COORDINATOR_NOT_AVAILABLE (Kafka's txnLogAppendRetryQueue). Until then the id's
pending state is Complete*, so its producer's next requests get CONCURRENT_TRANSACTIONS.
Abandoned, as Kafka does, when this broker stops coordinating the id (the partition's new
coordinator re-sends the markers after its load), when the channel closes, or when a leader
answers INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED (a newer producer or coordinator
owns the partitions). Partitions of deleted topics (UNKNOWN_TOPIC_OR_PARTITION from the channel)
and UNSUPPORTED_* answers are dropped from the set awaiting markers, as Kafka does.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from brokers.coordinator.transactions.markers import MarkerSender, TxnMarker
from brokers.coordinator.transactions.metadata import TransactionMetadata, TxnState, TxnTransit
from brokers.coordinator.transactions.state import TransactionLog, TxnPartition
from brokers.wire.errors import ErrorCode

log = logging.getLogger("pier.transactions")
RETRY_BACKOFF_S = 0.1
MARKER_DONE = frozenset(
    {
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,  # the channel's answer for a deleted topic
        ErrorCode.unsupported_for_message_format,
        ErrorCode.unsupported_version,
    }
)
Completed = Callable[[bool], None]  # commit?


class TxnCompletion:
    def __init__(
        self,
        state: TransactionLog,
        markers: MarkerSender,
        *,
        on_completed: Completed,
        retry_backoff_s: float = RETRY_BACKOFF_S,
    ) -> None:
        self._state = state
        self._markers = markers
        self._on_completed = on_completed
        self._backoff_s = retry_backoff_s
        self._tasks: dict[str, tuple[TxnPartition, asyncio.Task[None]]] = {}

    @property
    def pending(self) -> int:
        """Transactions whose markers or Complete* record are still being written."""
        return len(self._tasks)

    def start(
        self,
        transactional_id: str,
        entry: TxnPartition,
        meta: TransactionMetadata,
        transit: TxnTransit,
    ) -> None:
        """Send the markers of `meta`'s transaction, then write `transit` (its Complete*)."""
        task = asyncio.get_running_loop().create_task(
            self._run(transactional_id, entry, meta, transit)
        )
        self._tasks[transactional_id] = (entry, task)
        task.add_done_callback(lambda done: self._done(transactional_id, done))

    def _done(self, transactional_id: str, task: asyncio.Task[None]) -> None:
        current = self._tasks.get(transactional_id)
        if current is not None and current[1] is task:
            del self._tasks[transactional_id]
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "event=txn_completion_failed transactional_id=%s error=%r",
                transactional_id,
                task.exception(),
            )

    def cancel_partition(self, index: int) -> None:
        """The partition was unloaded: its transactions are its next coordinator's to finish."""
        for entry, task in list(self._tasks.values()):
            if entry.index == index:
                task.cancel()

    async def wait_idle(self) -> None:
        """Until no completion runs (tests, benchmarks); never cancels them."""
        while self._tasks:
            await asyncio.wait([task for _, task in self._tasks.values()])

    async def close(self) -> None:
        tasks = [task for _, task in self._tasks.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(
        self,
        transactional_id: str,
        entry: TxnPartition,
        meta: TransactionMetadata,
        transit: TxnTransit,
    ) -> None:
        commit = transit.state is TxnState.COMPLETE_COMMIT
        marker = TxnMarker(
            producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            commit=commit,
            coordinator_epoch=entry.coordinator_epoch,
            partitions=tuple(sorted(meta.partitions)),
        )
        results = await self._markers.send(marker) if marker.partitions else {}
        if not self._still_ours(transactional_id, entry, meta):
            log.info("event=txn_markers_abandoned transactional_id=%s", transactional_id)
            return
        failed = {tp: code for tp, code in results.items() if code not in MARKER_DONE}
        if failed:
            log.error(
                "event=txn_markers_failed transactional_id=%s producer_id=%d epoch=%d errors=%s",
                transactional_id,
                marker.producer_id,
                marker.producer_epoch,
                {f"{t}-{p}": code.name for (t, p), code in sorted(failed.items())},
            )
            return
        await self._write_complete(transactional_id, entry, transit, commit)

    def _still_ours(self, transactional_id: str, entry: TxnPartition, meta: object) -> bool:
        return self._state.is_current(entry) and entry.transactions.get(transactional_id) is meta

    async def _write_complete(
        self, transactional_id: str, entry: TxnPartition, transit: TxnTransit, commit: bool
    ) -> None:
        while True:
            error = await self._state.write(
                transactional_id, entry, transit, retry_on=_retriable_append
            )
            if error == ErrorCode.none:
                self._on_completed(commit)
                log.debug("event=txn_completed transactional_id=%s", transactional_id)
                return
            if not _retriable_append(error) or not self._state.is_current(entry):
                log.info(
                    "event=txn_complete_not_written transactional_id=%s error=%s",
                    transactional_id,
                    error.name,
                )
                return
            await asyncio.sleep(self._backoff_s)


def _retriable_append(error: ErrorCode) -> bool:
    return error == ErrorCode.coordinator_not_available
