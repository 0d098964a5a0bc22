"""Transaction markers (KIP-98): writing COMMIT/ABORT markers on the partitions of a transaction.

Owns: `TxnMarkerChannel`, the transaction coordinator's side (Kafka's
TransactionMarkerChannelManager): group a marker's partitions by leader, write the local ones
directly (`write_markers_locally`, bound by the composition root) and send WriteTxnMarkers
(key 27) to the others (`marker_brokers.RemoteBrokers`), retrying until every partition has it.
This is the package's surface for transactions: it re-exports `MarkerRequest`, `TxnCompletion`,
`MarkerErrors` (`marker_request`) and the leader's side, `write_markers_locally`
(`local_markers`), so callers import them from here.

Why the channel never gives up on a live partition: a transaction completes only once all its
markers are written; until then its partitions' last stable offsets stay behind it. Retriable
answers (Kafka's TransactionMarkerRequestCompletionHandler: NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT,
KAFKA_STORAGE_ERROR, a lost connection) are retried after a short backoff against the leaders
the metadata cache names then. Final answers: NONE; INVALID_PRODUCER_EPOCH and
TRANSACTION_COORDINATOR_FENCED (a newer producer or coordinator took over: the coordinator cancels
the transaction's markers, so the partitions not yet written get the same code);
UNSUPPORTED_FOR_MESSAGE_FORMAT (dropped, as Kafka); UNKNOWN_TOPIC_OR_PARTITION for a partition
whose topic is gone from the metadata cache (dropped, as Kafka does). `close()` stops every send;
partitions still pending then answer COORDINATOR_NOT_AVAILABLE.

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from brokers.client.config import ClientConfig
from brokers.client.errors import BrokerConnectionError
from brokers.common.clock import Clock
from brokers.replication.local_markers import (
    DEFAULT_MARKER_TIMEOUT_S,
    OFFSETS_TOPIC,
    marker_error_code,
    write_markers_locally,
)
from brokers.replication.marker_brokers import CHANNEL_CLIENT_CONFIG, RemoteBrokers
from brokers.replication.marker_request import (
    MarkerErrors,
    MarkerRequest,
    TopicPartition,
    TxnCompletion,
)
from brokers.replication.metadata_cache import BrokerEndpoint, PartitionMetadata, TopicMetadata
from brokers.wire.errors import ErrorCode

__all__ = [
    "CHANNEL_CLIENT_CONFIG",
    "DEFAULT_MARKER_TIMEOUT_S",
    "OFFSETS_TOPIC",
    "MarkerErrors",
    "MarkerRequest",
    "RemoteBrokers",
    "TxnCompletion",
    "TxnMarkerChannel",
    "marker_error_code",
    "write_markers_locally",
]
DEFAULT_RETRY_BACKOFF_S = 0.1  # retry.backoff.ms, doubled per failed round up to the max
DEFAULT_RETRY_BACKOFF_MAX_S = 1.0  # retry.backoff.max.ms (KIP-580)
log = logging.getLogger(__name__)


class LeaderView(Protocol):
    """The metadata cache, as far as the channel reads it."""

    def topic(self, name: str) -> TopicMetadata | None: ...

    def inter_broker_endpoint(self, node_id: int) -> BrokerEndpoint | None: ...


LocalWriter = Callable[[MarkerRequest], Awaitable[MarkerErrors]]
RemoteWriter = Callable[[int, MarkerRequest], Awaitable[MarkerErrors]]

RETRIABLE = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
        ErrorCode.kafka_storage_error,
        ErrorCode.leader_not_available,
        ErrorCode.broker_not_available,
        ErrorCode.network_exception,
    }
)
FENCED = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})
# Kafka drops these partitions from the set awaiting markers: the producer could not have
# written transactional data there.
DROPPED = frozenset({ErrorCode.unsupported_for_message_format, ErrorCode.unsupported_version})


@dataclass(slots=True)
class _Send:
    """One marker being delivered: which partitions still need it, and the answers so far."""

    marker: MarkerRequest
    pending: set[TopicPartition]
    results: MarkerErrors = field(default_factory=dict)
    fenced: ErrorCode | None = None

    def settle(self, key: TopicPartition, code: ErrorCode) -> None:
        self.pending.discard(key)
        self.results[key] = code

    def take(
        self, answers: Mapping[TopicPartition, ErrorCode], asked: Iterable[TopicPartition]
    ) -> None:
        for key in asked:
            code = answers.get(key, ErrorCode.unknown_server_error)
            if code == ErrorCode.none or code in DROPPED:
                self.settle(key, code)
            elif code in FENCED:
                self.settle(key, code)
                self.fenced = self.fenced or code
            elif code not in RETRIABLE:
                log.warning(
                    "event=txn_marker_retry_unexpected topic=%s partition=%d producer_id=%d "
                    "error=%s",
                    key[0],
                    key[1],
                    self.marker.producer_id,
                    code.name,
                )


class TxnMarkerChannel:
    """Delivers markers to the partitions' leaders until every one is written (see module doc)."""

    def __init__(
        self,
        metadata: LeaderView,
        *,
        node_id: int,
        local: LocalWriter,
        clock: Clock,
        client_config: ClientConfig | None = None,
        retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
        retry_backoff_max_s: float = DEFAULT_RETRY_BACKOFF_MAX_S,
        remote: RemoteWriter | None = None,
    ) -> None:
        self._metadata = metadata
        self._node_id = node_id
        self._local = local
        self._clock = clock
        self._backoff_s = (retry_backoff_s, max(retry_backoff_s, retry_backoff_max_s))
        self._brokers = RemoteBrokers(metadata, client_config or CHANNEL_CLIENT_CONFIG)
        self._remote: RemoteWriter = remote or self._brokers.write
        self._closed = asyncio.Event()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def send(self, marker: MarkerRequest) -> MarkerErrors:
        """Write `marker` on all its partitions; one final code per partition (module doc)."""
        send = _Send(marker, set(marker.partitions))
        started = self._clock.monotonic()
        backoff, rounds = self._backoff_s[0], 0
        while send.pending and send.fenced is None and not self.closed:
            rounds += 1
            await self._until_closed(self._round(send))
            if send.pending and send.fenced is None:
                await self._until_closed(asyncio.sleep(backoff))
                backoff = min(backoff * 2, self._backoff_s[1])
        final = send.fenced or ErrorCode.coordinator_not_available
        for key in list(send.pending):
            send.settle(key, final)
        elapsed_ms = int((self._clock.monotonic() - started) * 1000)
        log.log(
            logging.INFO if rounds > 1 else logging.DEBUG,
            "event=txn_markers_sent producer_id=%d commit=%s partitions=%d rounds=%d "
            "elapsed_ms=%d outcome=%s",
            marker.producer_id, marker.commit, len(send.results), rounds, elapsed_ms,
            final.name if send.fenced or send.pending else "none",
        )  # fmt: skip
        return send.results

    async def _until_closed(self, step: Awaitable[None]) -> None:
        """Run `step`, abandoning it if the channel closes meanwhile (a round may wait on a
        leader's ISR for request.timeout.ms; close() must not)."""
        task = asyncio.ensure_future(step)
        closed = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait({task, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pending in (task, closed):
                pending.cancel()
        if task.done() and not task.cancelled():
            task.result()

    async def _round(self, send: _Send) -> None:
        """One attempt: each leader gets the marker for its partitions, all at once. A leader
        that could not be reached answers nothing: its partitions stay pending."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for key in sorted(send.pending):
            leader = self._leader(key)
            if leader is None:
                send.settle(key, ErrorCode.unknown_topic_or_partition)  # topic deleted: dropped
                log.info("event=txn_marker_dropped topic=%s partition=%d", key[0], key[1])
            elif leader >= 0:
                by_leader.setdefault(leader, []).append(key)
        calls = [self._write(leader, send.marker.on(keys)) for leader, keys in by_leader.items()]
        for asked, answers in await asyncio.gather(*calls):
            if answers:
                send.take(answers, asked.partitions)

    def _leader(self, key: TopicPartition) -> int | None:
        """The partition's leader; -1 while it has none; None when the partition is gone."""
        topic = self._metadata.topic(key[0])
        found: PartitionMetadata | None = None if topic is None else topic.partitions.get(key[1])
        return None if found is None else found.leader

    async def _write(
        self, leader: int, marker: MarkerRequest
    ) -> tuple[MarkerRequest, MarkerErrors]:
        try:
            if leader == self._node_id:
                return marker, await self._local(marker)
            return marker, await self._remote(leader, marker)
        except (BrokerConnectionError, OSError) as exc:
            log.info("event=txn_marker_send_failed broker=%d error=%r", leader, exc)
        except Exception as exc:  # one leader's failure must not stop the others' retries
            log.warning("event=txn_marker_send_error broker=%d error=%r", leader, exc)
        return marker, {}

    async def close(self) -> None:
        """Stop every send (pending partitions answer COORDINATOR_NOT_AVAILABLE); close sockets."""
        self._closed.set()
        await self._brokers.close()
