"""Reading a `__consumer_offsets` partition back into groups and offsets (Kafka's loadGroupsAndOffsets).

Owns: `load_partition` — replays every batch from the log start: the last record per key wins and
a tombstone deletes, exactly the view compaction converges to, so a compacted and an uncompacted
log load the same. Each offset keeps the log offset of its record, which orders plain commits
against transactional ones. A transactional batch (a TxnOffsetCommit) leaves its offsets pending
under its producer id; that producer's next end-transaction marker in the partition commits them
(the later record wins against plain commits, as Kafka's replayEndTransactionMarker) or drops
them; offsets still pending at the log end stay pending, for the marker the transaction
coordinator will send later. KIP-848 consumer group records (key types 3-8,
`consumer_group_records`) are kept raw per group, last value per key, for
`consumer_group_store.install`; records of other key types (share groups, regex resolutions) and
control records that are not markers are ignored. A record that does not parse is
logged and skipped rather than failing the whole partition. Yields to the event loop between
batches, so loading a large partition never stalls other requests. Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from brokers.coordinator.consumer_group_records import decode_consumer_key
from brokers.coordinator.errors import GroupRecordError
from brokers.coordinator.group_records import (
    GroupMetadataKey,
    GroupMetadataRecord,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from brokers.coordinator.offsets import GroupOffsets, LoggedOffset
from brokers.coordinator.offsets_topic import OffsetsTopic
from brokers.records.batch import NO_PRODUCER_ID
from brokers.records.builder import read_batch
from brokers.records.control import read_marker
from brokers.records.errors import RecordError
from brokers.records.record import Record

log = logging.getLogger("pier.coordinator")
_YIELD_EVERY = 64  # batches


@dataclass(slots=True)
class LoadedPartition:
    partition: int = -1
    groups: dict[str, GroupMetadataRecord] = field(default_factory=dict)
    offsets: dict[str, GroupOffsets] = field(default_factory=dict)
    open_transactions: dict[int, set[str]] = field(default_factory=dict)  # producer → groups
    consumer_records: dict[str, dict[bytes, bytes]] = field(default_factory=dict)  # KIP-848
    records: int = 0
    skipped: int = 0

    def apply(self, record: Record, record_offset: int, producer_id: int = NO_PRODUCER_ID) -> None:
        """One record of a data batch; `producer_id` is set for transactional batches."""
        if record.key is None:
            raise GroupRecordError("record without a key")
        key = decode_key(record.key)
        if isinstance(key, OffsetCommitKey):
            self._apply_offset(key, record.value, record_offset, producer_id)
        elif isinstance(key, GroupMetadataKey):
            if record.value is None:
                self.groups.pop(key.group, None)
            else:
                self.groups[key.group] = decode_group_metadata_value(record.value)
        elif key is None:
            self._apply_consumer(record.key, record.value)

    def _apply_consumer(self, key_bytes: bytes, value: bytes | None) -> None:
        key = decode_consumer_key(key_bytes)
        if key is None:
            return
        records = self.consumer_records.setdefault(key.group_id, {})
        if value is not None:
            records[key_bytes] = value
            return
        records.pop(key_bytes, None)
        if not records:
            del self.consumer_records[key.group_id]

    def _apply_offset(
        self, key: OffsetCommitKey, value: bytes | None, record_offset: int, producer_id: int
    ) -> None:
        tp = (key.topic, key.partition)
        if value is None:
            offsets = self.offsets.get(key.group)
            if offsets is not None:
                offsets.remove(tp)
            return
        logged = LoggedOffset(decode_offset_commit_value(value), record_offset)
        offsets = self.offsets.setdefault(key.group, GroupOffsets())
        if producer_id == NO_PRODUCER_ID:
            offsets.put(tp, logged.value, logged.record_offset)
        else:
            offsets.stage_txn(producer_id, {tp: logged})
            self.open_transactions.setdefault(producer_id, set()).add(key.group)

    def apply_marker(self, producer_id: int, commit: bool) -> None:
        for group_id in self.open_transactions.pop(producer_id, set()):
            offsets = self.offsets.get(group_id)
            if offsets is not None:
                offsets.complete_txn(producer_id, commit)

    def offset_groups(self) -> dict[str, GroupOffsets]:
        """Groups with committed or pending offsets."""
        return {g: o for g, o in self.offsets.items() if len(o) > 0 or o.has_pending()}


async def load_partition(topic: OffsetsTopic, partition: int) -> LoadedPartition:
    loaded = LoadedPartition(partition)
    for count, batch in enumerate(topic.read_batches(partition, 0), start=1):
        _apply_batch(loaded, partition, batch)
        if count % _YIELD_EVERY == 0:
            await asyncio.sleep(0)
    log.info(
        "event=offsets_partition_loaded partition=%d groups=%d consumer_groups=%d "
        "offset_groups=%d open_transactions=%d records=%d skipped=%d",
        partition, len(loaded.groups), len(loaded.consumer_records), len(loaded.offset_groups()),
        len(loaded.open_transactions), loaded.records, loaded.skipped,
    )  # fmt: skip
    return loaded


def _apply_batch(loaded: LoadedPartition, partition: int, batch: bytes) -> None:
    try:
        header, records = read_batch(batch)
        if header.is_control:
            marker = read_marker(batch)
    except RecordError as exc:
        log.error("event=offsets_batch_unreadable partition=%d error=%r", partition, exc)
        loaded.skipped += 1
        return
    if header.is_control:
        loaded.apply_marker(header.producer_id, marker.commit)
        return
    producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
    for record in records:
        try:
            loaded.apply(record, header.base_offset + record.offset_delta, producer_id)
            loaded.records += 1
        except GroupRecordError as exc:
            log.error("event=offsets_record_unreadable partition=%d error=%r", partition, exc)
            loaded.skipped += 1
