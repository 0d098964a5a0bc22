"""Remote segment metadata kept in the internal topic `__remote_log_metadata` (Kafka's
TopicBasedRemoteLogMetadataManager).

Owns: `PartitionTier` (what the remote tier holds for one user partition: every segment's latest
state, the DeleteRecords log start, and what follows from them: the finished segments in offset
order, where the remote log starts and the offset after the last copied one) and
`RemoteLogMetadataManager`, which publishes events (an acks=all append to the metadata partition of
the user partition, `metadata_partition`) and folds into memory every record of the metadata
partitions this broker holds a replica of, read from its local replica up to the high watermark
(`refresh`), so a broker that becomes leader knows where the previous leader stopped. Folding is
idempotent: a segment's state only moves forward, so a record seen twice (published here, then
read back) changes nothing. Tiers are kept per topic id too: a topic deleted and created again
under the same name starts with an empty tier, and the old one's segments are orphans (`stale`)
that its new leader deletes.

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from brokers.log.log import Log
from brokers.records.builder import build_batch, read_batch
from brokers.records.record import Record
from brokers.replication.replica_manager import ReplicaManager
from brokers.tiered.segment_metadata import (
    LogStartEvent,
    MetadataDecodeError,
    MetadataEvent,
    RemoteSegment,
    SegmentState,
    decode,
    encode,
    metadata_partition,
)

METADATA_TOPIC = "__remote_log_metadata"
READ_CHUNK_BYTES = 1 << 20
_log = logging.getLogger("pier.tiered")


class MetadataTopic(Protocol):
    """The writing half of the internal topic (brokers.app's BrokerInternalTopic)."""

    def partition_count(self) -> int: ...

    async def append(self, partition: int, batch: bytes) -> int:
        """Append as leader and return once committed; raises when this broker cannot."""


@dataclass(slots=True)
class PartitionTier:
    segments: dict[str, RemoteSegment] = field(default_factory=dict)
    log_start_offset: int = 0  # from DeleteRecords below the local log start (LogStartEvent)
    _finished: list[RemoteSegment] | None = None  # cache of `finished`, reset on every change

    def apply(self, event: MetadataEvent) -> None:
        self._finished = None
        if isinstance(event, LogStartEvent):
            self.log_start_offset = max(self.log_start_offset, event.log_start_offset)
            return
        known = self.segments.get(event.segment_id)
        if known is None or event.state >= known.state:
            self.segments[event.segment_id] = event
        if event.state is SegmentState.DELETE_SEGMENT_FINISHED:
            del self.segments[event.segment_id]

    @property
    def finished(self) -> list[RemoteSegment]:
        """COPY_SEGMENT_FINISHED segments (readable) by start offset."""
        if self._finished is None:
            self._finished = sorted(
                (
                    s
                    for s in self.segments.values()
                    if s.state is SegmentState.COPY_SEGMENT_FINISHED
                ),
                key=lambda s: (s.start_offset, s.end_offset),
            )
        return self._finished

    @property
    def copied_upto(self) -> int | None:
        """The offset after the last copied one (Kafka's highest copied offset + 1), or None."""
        finished = self.finished
        return max(s.next_offset for s in finished) if finished else None

    @property
    def start_offset(self) -> int | None:
        """Where the remote log starts (None when nothing is copied)."""
        finished = self.finished
        if not finished:
            return None
        return max(finished[0].start_offset, self.log_start_offset)

    def segment_for(self, offset: int) -> RemoteSegment | None:
        """The finished segment holding `offset` (the later one where copies overlap)."""
        finished = self.finished
        index = bisect_right([s.start_offset for s in finished], offset) - 1
        while index >= 0:
            segment = finished[index]
            if segment.end_offset >= offset:
                return segment
            index -= 1
        return None

    def in_state(self, state: SegmentState) -> list[RemoteSegment]:
        return [s for s in self.segments.values() if s.state is state]


class RemoteLogMetadataManager:
    def __init__(self, topic: MetadataTopic, replicas: ReplicaManager) -> None:
        self._topic = topic
        self._replicas = replicas
        self._tiers: dict[tuple[str, int, str], PartitionTier] = {}  # (topic, partition, id)
        self._read_upto: dict[int, int] = {}  # metadata partition -> next offset to fold

    def tier(self, topic: str, partition: int, topic_id: str = "") -> PartitionTier:
        key = (topic, partition, topic_id)
        found = self._tiers.get(key)
        if found is None:
            found = self._tiers[key] = PartitionTier()
        return found

    def find(self, topic: str, partition: int, topic_id: str = "") -> PartitionTier | None:
        return self._tiers.get((topic, partition, topic_id))

    def partition_of(self, topic: str, partition: int) -> int:
        """The metadata partition holding this partition's events."""
        return metadata_partition(topic, partition, self._topic.partition_count())

    def stale(self, topic: str, partition: int, topic_id: str) -> list[PartitionTier]:
        """Tiers of an earlier topic of the same name (another id): their segments are orphans."""
        return [
            tier for (name, index, tid), tier in self._tiers.items()
            if name == topic and index == partition and tid != topic_id and tier.segments
        ]  # fmt: skip

    async def publish(self, event: MetadataEvent) -> None:
        """Append `event` to its metadata partition (committed on return), then fold it."""
        key, value = encode(event)
        partition = metadata_partition(event.topic, event.partition, self._topic.partition_count())
        batch = build_batch([Record(offset_delta=0, timestamp_delta=0, key=key, value=value)])
        await self._topic.append(partition, batch)
        self.tier(event.topic, event.partition, event.topic_id).apply(event)

    def refresh(self) -> int:
        """Fold every new committed record of the metadata partitions held here; returns how many."""
        folded = 0
        for replica in self._replicas.partitions():
            if replica.topic == METADATA_TOPIC:
                folded += self._fold(replica.index, replica.log, replica.log.log_end_offset)
        return folded

    def _fold(self, partition: int, log: Log, high_watermark: int) -> int:
        offset = max(self._read_upto.get(partition, 0), log.log_start_offset)
        folded = 0
        while offset < high_watermark:
            read = log.read(offset, READ_CHUNK_BYTES, max_offset=high_watermark)
            if read.region is None or read.next_offset <= offset:
                break
            folded += self._fold_batches(read.region.read(), offset)
            offset = read.next_offset
        self._read_upto[partition] = offset
        return folded

    def _fold_batches(self, data: bytes, from_offset: int) -> int:
        folded = 0
        position = 0
        while position < len(data):
            header, records = read_batch(data, position)
            position += header.size
            if header.is_control:
                continue
            for record in records:
                if header.base_offset + record.offset_delta < from_offset:
                    continue
                folded += self._fold_record(record.key, record.value)
        return folded

    def _fold_record(self, key: bytes | None, value: bytes | None) -> int:
        if key is None or value is None:
            return 0
        try:
            event = decode(key, value)
        except MetadataDecodeError as exc:
            _log.warning("event=remote_metadata_skipped error=%r", str(exc))
            return 0
        self.tier(event.topic, event.partition, event.topic_id).apply(event)
        return 1

    def tiers(self) -> Iterable[tuple[tuple[str, int, str], PartitionTier]]:
        return list(self._tiers.items())
