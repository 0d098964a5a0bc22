"""The leader's side of transaction markers: write them on the partitions this broker leads.

Owns: `write_markers_locally` — append the COMMIT/ABORT marker on each partition (checked like an
acks=all produce: leadership, `min.insync.replicas`, the producer and coordinator epochs) and
answer once each one's high watermark passes it, a lost leadership, an ISR shrunk below the
minimum, or the timeout (Kafka's DelayedProduce for an "origin coordinator" append). Then, as
Kafka's onTransactionCompleted, each committed `__consumer_offsets` partition is reported to the
group coordinator, which materialises or drops the producer's pending offsets. Called by the
WriteTxnMarkers handler and, for local leaders, by `TxnMarkerChannel`.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from brokers.common.clock import Clock
from brokers.log import errors as log_errors
from brokers.log.log import AppendResult
from brokers.records.control import EndTxnMarker
from brokers.replication import errors as replication_errors
from brokers.replication.isr import AckOutcome
from brokers.replication.marker_request import (
    MarkerErrors,
    MarkerRequest,
    TopicPartition,
    TxnCompletion,
)
from brokers.wire.errors import ErrorCode

OFFSETS_TOPIC = "__consumer_offsets"  # brokers.coordinator.offsets_topic (a layer above us)
DEFAULT_MARKER_TIMEOUT_S = 30.0  # the leader's wait for replication: Kafka's request.timeout.ms
log = logging.getLogger(__name__)


class MarkerPartition(Protocol):
    """What `write_markers_locally` needs of a `Partition`."""

    topic: str
    index: int
    leadership_term: int

    @property
    def is_leader(self) -> bool: ...

    def append_marker(
        self, producer_id: int, producer_epoch: int, marker: EndTxnMarker
    ) -> AppendResult: ...

    def acks_all_outcome(self, required_offset: int) -> AckOutcome: ...


class MarkerReplicas(Protocol):
    def get(self, topic: str, index: int) -> Any:
        """The partition (a `MarkerPartition`), or UnknownTopicOrPartitionError."""
        ...

    def find(self, topic: str, index: int) -> Any: ...


class AppendWaiter(Protocol):
    """The purgatory: woken by appends and high-watermark moves of `keys`."""

    async def wait(self, keys: Iterable[Hashable], timeout: float) -> bool: ...


def marker_error_code(exc: BaseException) -> ErrorCode:
    """The errors a marker append can meet, as Kafka codes. (The handlers' one mapper lives a
    layer above replication; the WriteTxnMarkers handler passes it in instead of this.)"""
    for cls in type(exc).__mro__:
        code = _MARKER_CODES.get(cls)
        if code is not None:
            return code
    log.error("event=txn_marker_unexpected_error type=%s error=%r", type(exc).__name__, str(exc))
    return ErrorCode.unknown_server_error


_MARKER_CODES: dict[type[BaseException], ErrorCode] = {
    replication_errors.UnknownTopicOrPartitionError: ErrorCode.unknown_topic_or_partition,
    replication_errors.NotLeaderOrFollowerError: ErrorCode.not_leader_or_follower,
    replication_errors.NotEnoughReplicasError: ErrorCode.not_enough_replicas,
    log_errors.InvalidProducerEpochError: ErrorCode.invalid_producer_epoch,
    log_errors.TransactionCoordinatorFencedError: ErrorCode.transaction_coordinator_fenced,
    log_errors.LogClosedError: ErrorCode.not_leader_or_follower,  # deleted or stopped meanwhile
    log_errors.StorageError: ErrorCode.kafka_storage_error,
}


@dataclass(slots=True)
class _Appended:
    """A marker appended on one partition, waiting for the high watermark to pass it."""

    key: TopicPartition
    partition: MarkerPartition
    term: int
    required_offset: int

    def outcome(self, replicas: MarkerReplicas) -> ErrorCode | None:
        """None while pending; else the final code (NONE: committed)."""
        p = self.partition
        if (
            not p.is_leader
            or p.leadership_term != self.term
            or replicas.find(p.topic, p.index) is not p
        ):
            return ErrorCode.not_leader_or_follower
        decided = p.acks_all_outcome(self.required_offset)
        if decided is AckOutcome.PENDING:
            return None
        if decided is AckOutcome.DONE:
            return ErrorCode.none
        return ErrorCode.not_enough_replicas_after_append


async def write_markers_locally(
    replicas: MarkerReplicas,
    purgatory: AppendWaiter,
    marker: MarkerRequest,
    *,
    on_offsets_marker: TxnCompletion,
    timeout_s: float,
    clock: Clock | None = None,
    error_code_for: Callable[[BaseException], ErrorCode] = marker_error_code,
) -> MarkerErrors:
    """Append `marker` on each of its partitions (this broker must lead them) and wait until
    each one's high watermark passes it (acks=all) or `timeout_s` passes (REQUEST_TIMED_OUT).
    For each committed `__consumer_offsets` partition, `on_offsets_marker` is called (Kafka's
    onTransactionCompleted), so the group coordinator materialises or drops pending offsets."""
    results: MarkerErrors = {}
    appended: list[_Appended] = []
    end = EndTxnMarker(
        commit=marker.commit,
        coordinator_epoch=marker.coordinator_epoch,
        transaction_version=marker.transaction_version,
    )
    for key in dict.fromkeys(marker.partitions):
        try:
            partition = replicas.get(*key)
            result = partition.append_marker(marker.producer_id, marker.producer_epoch, end)
        except Exception as exc:
            results[key] = error_code_for(exc)
            continue
        appended.append(
            _Appended(key, partition, partition.leadership_term, result.last_offset + 1)
        )
    results.update(await _await_committed(replicas, purgatory, appended, timeout_s, clock))
    for (topic, index), code in results.items():
        if topic == OFFSETS_TOPIC and code == ErrorCode.none:
            _complete(on_offsets_marker, index, marker)
    return results


async def _await_committed(
    replicas: MarkerReplicas,
    purgatory: AppendWaiter,
    pending: list[_Appended],
    timeout_s: float,
    clock: Clock | None,
) -> MarkerErrors:
    now: Callable[[], float] = clock.monotonic if clock else asyncio.get_running_loop().time
    deadline = now() + timeout_s
    decided: MarkerErrors = {}
    while True:
        still = []
        for entry in pending:
            code = entry.outcome(replicas)
            if code is None:
                still.append(entry)
            else:
                decided[entry.key] = code
        pending = still
        remaining = deadline - now()
        if not pending or remaining <= 0:
            break
        await purgatory.wait([e.key for e in pending], remaining)
    decided.update((entry.key, ErrorCode.request_timed_out) for entry in pending)
    return decided


def _complete(callback: TxnCompletion, index: int, marker: MarkerRequest) -> None:
    try:
        callback(index, marker.producer_id, marker.commit)
    except Exception as exc:  # the marker is written; the group side reloads it from the log
        log.error(
            "event=txn_offsets_completion_failed partition=%d producer_id=%d error=%r",
            index,
            marker.producer_id,
            exc,
        )
