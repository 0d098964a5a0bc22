"""A transaction marker to write (one WriteTxnMarkers entry) and the answers per partition.

Owns: `MarkerRequest`, `MarkerErrors` and `TxnCompletion`, shared by the leader's side
(`local_markers`), the wire (`marker_brokers`) and the channel (`txn_markers`, which re-exports
them). Pure values; thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from brokers.wire.errors import ErrorCode

TopicPartition = tuple[str, int]
MarkerErrors = dict[TopicPartition, ErrorCode]
TxnCompletion = Callable[[int, int, bool], None]  # (offsets partition, producer id, commit)


@dataclass(frozen=True, slots=True)
class MarkerRequest:
    """One WriteTxnMarkers entry: the end of one producer's transaction on some partitions."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[tuple[str, int], ...]
    transaction_version: int = 0  # WriteTxnMarkers v2 (KIP-890 part 2); 0 before v2

    def on(self, partitions: Iterable[TopicPartition]) -> MarkerRequest:
        """The same marker for other partitions (a subset, grouped by leader)."""
        return MarkerRequest(
            self.producer_id,
            self.producer_epoch,
            self.commit,
            self.coordinator_epoch,
            tuple(partitions),
            self.transaction_version,
        )
