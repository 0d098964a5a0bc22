"""How the transaction coordinator reaches `__transaction_state`, and which partition holds an id.

Owns: the `StateTopic` protocol (implemented by `brokers.app.internal_topic` over the broker's
partitions, so this package never imports replication) and `partition_for`, Kafka's placement
`Utils.abs(transactionalId.hashCode()) % partitions` — the group coordinator's function, reused.
Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from brokers.coordinator.offsets_topic import partition_for

__all__ = ["StateTopic", "partition_for"]


class StateTopic(Protocol):
    """The state topic as the coordinator needs it. Appends must apply in call order."""

    def partition_count(self) -> int:
        """Partitions of the topic (the configured count until it exists)."""
        ...

    async def append(self, partition: int, batch: bytes) -> int:
        """Append one batch as leader (acks=all) once committed; returns its last offset.

        Raises StateNotCoordinatorError / StateNotAvailableError / StateRecordTooLargeError.
        """
        ...

    def read_batches(self, partition: int, from_offset: int) -> Iterator[bytes]:
        """Every stored batch from `from_offset` to the log end, one batch per item."""
        ...
