"""Writing group state to `__consumer_offsets`: one batch per operation, in the group's partition.

Owns: `GroupLog` — turns offset commits, group metadata and their tombstones into records
(formats in `group_records`), builds one uncompressed v2 batch per operation (CreateTime = now,
no producer id, as Kafka's coordinator writes them) and appends it to
`partition_for(group_id)` through the `OffsetsTopic`. An operation's records share one batch, so
a multi-partition commit is all-or-nothing. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from brokers.common.clock import Clock
from brokers.coordinator.group_records import (
    GroupMetadataRecord,
    OffsetAndMetadata,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from brokers.coordinator.offsets_topic import OffsetsTopic, partition_for
from brokers.records.builder import build_batch

Entry = tuple[bytes, bytes | None]  # key, value (None: tombstone)
TopicPartition = tuple[str, int]


class GroupLog:
    def __init__(self, topic: OffsetsTopic, clock: Clock) -> None:
        self.topic = topic
        self._clock = clock
        self.appends = 0

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.topic.partition_count())

    async def append(self, group_id: str, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        now = self._clock.time_ms()
        batch = build_batch([(key, value) for key, value in entries], base_timestamp=now)
        await self.topic.append(self.partition_for(group_id), batch)
        self.appends += 1

    async def store_group(self, group_id: str, record: GroupMetadataRecord) -> None:
        """`GroupStore`: the group's metadata after a rebalance or a static member's return."""
        await self.append(group_id, [group_entry(group_id, record)])


def group_entry(group_id: str, record: GroupMetadataRecord | None) -> Entry:
    value = None if record is None else encode_group_metadata_value(record)
    return encode_group_metadata_key(group_id), value


def offset_entry(group_id: str, tp: TopicPartition, value: OffsetAndMetadata | None) -> Entry:
    encoded = None if value is None else encode_offset_commit_value(value)
    return encode_offset_commit_key(group_id, tp[0], tp[1]), encoded


def offset_tombstones(group_id: str, tps: Iterable[TopicPartition]) -> list[Entry]:
    return [offset_entry(group_id, tp, None) for tp in tps]
