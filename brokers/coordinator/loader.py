"""Reading a `__consumer_offsets` partition back into groups and offsets (Kafka's loadGroupsAndOffsets).

Owns: `load_partition` — replays every batch from the log start: the last record per key wins and
a tombstone deletes, exactly the view compaction converges to, so a compacted and an uncompacted
log load the same. Control batches are skipped; so are transactional offset commits (the
transaction coordinator is not built yet, so none of ours are ever written). Records of key
types this coordinator does not own (KIP-848/share groups) are ignored. A record that does not
parse is logged and skipped rather than failing the whole partition. Yields to the event loop
between batches, so loading a large partition never stalls other requests. Runs on the event
loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from brokers.coordinator.errors import GroupRecordError
from brokers.coordinator.group_records import (
    GroupMetadataKey,
    GroupMetadataRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from brokers.coordinator.offsets_topic import OffsetsTopic
from brokers.records.builder import read_batch
from brokers.records.errors import RecordError
from brokers.records.record import Record

log = logging.getLogger("pier.coordinator")
_YIELD_EVERY = 64  # batches


@dataclass(slots=True)
class LoadedPartition:
    groups: dict[str, GroupMetadataRecord] = field(default_factory=dict)
    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0

    def apply(self, record: Record) -> None:
        if record.key is None:
            raise GroupRecordError("record without a key")
        key = decode_key(record.key)
        if isinstance(key, OffsetCommitKey):
            self._apply_offset(key, record.value)
        elif isinstance(key, GroupMetadataKey):
            if record.value is None:
                self.groups.pop(key.group, None)
            else:
                self.groups[key.group] = decode_group_metadata_value(record.value)

    def _apply_offset(self, key: OffsetCommitKey, value: bytes | None) -> None:
        tp = (key.topic, key.partition)
        if value is None:
            committed = self.offsets.get(key.group)
            if committed is not None:
                committed.pop(tp, None)
                if not committed:
                    del self.offsets[key.group]
            return
        self.offsets.setdefault(key.group, {})[tp] = decode_offset_commit_value(value)


async def load_partition(topic: OffsetsTopic, partition: int) -> LoadedPartition:
    loaded = LoadedPartition()
    for count, batch in enumerate(topic.read_batches(partition, 0), start=1):
        _apply_batch(loaded, partition, batch)
        if count % _YIELD_EVERY == 0:
            await asyncio.sleep(0)
    log.info(
        "event=offsets_partition_loaded partition=%d groups=%d offset_groups=%d records=%d "
        "skipped=%d",
        partition, len(loaded.groups), len(loaded.offsets), loaded.records, loaded.skipped,
    )  # fmt: skip
    return loaded


def _apply_batch(loaded: LoadedPartition, partition: int, batch: bytes) -> None:
    try:
        header, records = read_batch(batch)
    except RecordError as exc:
        log.error("event=offsets_batch_unreadable partition=%d error=%r", partition, exc)
        loaded.skipped += 1
        return
    if header.is_control or header.is_transactional:
        return
    for record in records:
        try:
            loaded.apply(record)
            loaded.records += 1
        except GroupRecordError as exc:
            log.error("event=offsets_record_unreadable partition=%d error=%r", partition, exc)
            loaded.skipped += 1
