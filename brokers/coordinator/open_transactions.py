"""Which groups hold pending transactional offsets of each producer, per `__consumer_offsets`
partition (Kafka's OffsetMetadataManager.openTransactionsByGroup, indexed the other way round).

Owns: `OpenTransactions` — filled when a TxnOffsetCommit stages offsets (or the loader reads one
back) and emptied by the transaction's marker in that partition, so completing a transaction
touches only the groups it wrote to. An entry may outlive its offsets (a group deleted or a write
that failed); completing it is then a no-op. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping


class OpenTransactions:
    def __init__(self) -> None:
        self._partitions: dict[int, dict[int, set[str]]] = {}  # partition → producer → groups

    def add(self, partition: int, producer_id: int, group_id: str) -> None:
        self._partitions.setdefault(partition, {}).setdefault(producer_id, set()).add(group_id)

    def take(self, partition: int, producer_id: int) -> set[str]:
        """The groups of `partition` with offsets of `producer_id`, forgotten here."""
        producers = self._partitions.get(partition)
        if producers is None:
            return set()
        groups = producers.pop(producer_id, set())
        if not producers:
            del self._partitions[partition]
        return groups

    def install(self, partition: int, producers: Mapping[int, set[str]]) -> None:
        """The open transactions a partition's load found (merged with any already known)."""
        for producer_id, groups in producers.items():
            for group_id in groups:
                self.add(partition, producer_id, group_id)

    def forget(self, partition: int) -> None:
        self._partitions.pop(partition, None)

    def producers(self, partition: int) -> set[int]:
        return set(self._partitions.get(partition, {}))

    def __len__(self) -> int:
        """Open (producer, partition) transactions with offsets here."""
        return sum(len(producers) for producers in self._partitions.values())
