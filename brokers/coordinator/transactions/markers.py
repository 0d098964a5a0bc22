"""What the coordinator asks of the marker channel: write a COMMIT/ABORT marker everywhere.

Owns: `TxnMarker` (one WriteTxnMarkers entry: producer id and epoch, the result, the coordinator
epoch and the partitions) and the `MarkerSender` protocol. The broker's implementation is the
replication layer's `TxnMarkerChannel` (Kafka's TransactionMarkerChannelManager), adapted by the
wiring in `brokers.app.transactions`, since this package may not import replication. `send`
returns once every partition has a final answer: the channel retries retriable errors
(NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, ...) itself and drops partitions of deleted topics,
so the codes it returns are NONE or ones no retry can fix (INVALID_PRODUCER_EPOCH,
TRANSACTION_COORDINATOR_FENCED, ...). Pure; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from brokers.wire.errors import ErrorCode

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TxnMarker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


class MarkerSender(Protocol):
    async def send(self, marker: TxnMarker) -> dict[TopicPartition, ErrorCode]:
        """Write `marker` to each of its partitions' leaders; per-partition final codes."""
        ...
