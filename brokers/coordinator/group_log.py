"""Writing group state to `__consumer_offsets`: one batch per operation, in the group's partition.

Owns: `GroupLog` — turns offset commits, group metadata and their tombstones into records
(formats in `group_records`), builds one uncompressed v2 batch per operation (CreateTime = now,
no producer id, as Kafka's coordinator writes them) and appends it to
`partition_for(group_id)` through the `OffsetsTopic`. An operation's records share one batch, so
a multi-partition commit is all-or-nothing; `append` answers the log offset of the first record
(the rest follow one by one), which orders commits as the log does.

A transactional offset commit (TxnOffsetCommit) is one batch carrying the producer's id and
epoch with the transactional flag set, so the log's producer state fences an older epoch and the
transaction's marker later closes it. Its base sequence is -1 (no sequence): Kafka's coordinator
writes 0 but appends with origin COORDINATOR, which skips the sequence check; our log has no
append origin and skips that check (and duplicate detection) only for batches without a sequence.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
from brokers.records.batch import NO_SEQUENCE
from brokers.records.builder import build_batch

Entry = tuple[bytes, bytes | None]  # key, value (None: tombstone)
TopicPartition = tuple[str, int]
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The transactional producer a TxnOffsetCommit writes for."""

    producer_id: int
    producer_epoch: int


class GroupLog:
    def __init__(self, topic: OffsetsTopic, clock: Clock) -> None:
        self.topic = topic
        self._clock = clock
        self.appends = 0

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.topic.partition_count())

    async def append(
        self, group_id: str, entries: Sequence[Entry], *, producer: TxnProducer | None = None
    ) -> int:
        """Append `entries` as one batch once committed; the first record's offset (-1: none).

        `producer` makes it a transactional batch of that producer id and epoch."""
        if not entries:
            return NO_OFFSET
        now = self._clock.time_ms()
        records = [(key, value) for key, value in entries]
        if producer is None:
            batch = build_batch(records, base_timestamp=now)
        else:
            batch = build_batch(
                records,
                base_timestamp=now,
                producer_id=producer.producer_id,
                producer_epoch=producer.producer_epoch,
                base_sequence=NO_SEQUENCE,
                is_transactional=True,
            )
        last_offset = await self.topic.append(self.partition_for(group_id), batch)
        self.appends += 1
        return last_offset - (len(entries) - 1)

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
