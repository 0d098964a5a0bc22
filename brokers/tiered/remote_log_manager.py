"""The broker's remote tier (Kafka's RemoteLogManager): copy, expire, read, and the offsets
clients see.

Owns: the periodic task (`run`, every `remote.log.manager.task.interval.ms`): fold new metadata
records, then for each partition this broker leads whose topic has `remote.storage.enable`: delete
remote segments past retention (and dangling ones), copy the next closed segments (COPY_SEGMENT_
STARTED, upload, COPY_SEGMENT_FINISHED, each event committed to `__remote_log_metadata` before the
next step), and tell the log how far it is copied (`Log.remote_copied_upto`: local retention
deletes only segments wholly below it, so a store that is down delays local deletion and never
loses data). Followers learn the same bound from the metadata they replicate. A leader that
loses leadership mid-copy stops before COPY_SEGMENT_FINISHED; the next leader resumes after the
last finished segment (from the metadata topic) and deletes the unfinished copy.

Also what handlers ask: `log_start_offset` (the remote log start when the remote tier holds the
offsets below the local one, Kafka's logStartOffset vs localLogStartOffset), `last_tiered_offset`
(ListOffsets -5), `serves` / `read` (Fetch below the local log start) and `delete_records`
(DeleteRecords below the local log start moves the remote log start; recorded in the metadata
topic and applied by expiring remote segments); and what a follower below the leader's local log
start asks (`aux_state`: the epochs and producer snapshot of the remote segment just below it,
brokers/replication/tier_state.py).

Events carry the topic id (`topic_id_of`, from the metadata): a topic created again under an old
name starts with an empty tier, its leader deletes the old topic's segments, and the leader of a
metadata partition deletes the segments of topics gone (`_delete_orphans`).

Runs on the event loop; every store call goes to a worker thread. Not thread-safe.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable

from brokers.common.clock import Clock
from brokers.log.log import Log
from brokers.log.txn_index import AbortedTxn
from brokers.replication.partition import Partition
from brokers.replication.replica_manager import ReplicaManager
from brokers.replication.tier_state import RemoteAuxState
from brokers.tiered.copier import Candidate, copy_candidates, leader_epochs, segment_files
from brokers.tiered.metadata_manager import (
    METADATA_TOPIC,
    PartitionTier,
    RemoteLogMetadataManager,
)
from brokers.tiered.metrics import RemoteStorageMetrics
from brokers.tiered.reader import RemoteRead, RemoteReader
from brokers.tiered.remote_retention import dangling, expired_segments
from brokers.tiered.segment_metadata import LogStartEvent, RemoteSegment, SegmentState
from brokers.tiered.store import IndexKind, RemoteStorageError, RemoteStore

_log = logging.getLogger("pier.tiered")


class RemoteLogManager:
    def __init__(
        self, store: RemoteStore, metadata: RemoteLogMetadataManager, replicas: ReplicaManager,
        *, clock: Clock, node_id: int, metrics: RemoteStorageMetrics, index_cache_segments: int,
        copy_max_bytes_per_second: int | None = None,
        topic_id_of: Callable[[str], str] = lambda topic: "",
    ) -> None:  # fmt: skip
        self.store = store
        self.metadata = metadata
        self._replicas = replicas
        self._clock = clock
        self._node_id = node_id
        self.metrics = metrics
        self._copy_rate = copy_max_bytes_per_second
        self._topic_id_of = topic_id_of  # the topic's current id (hex), "" when unknown
        self._orphans_seen: set[tuple[str, int, str]] = set()
        self.reader = RemoteReader(store, cached_segments=index_cache_segments)

    # -- the periodic task ------------------------------------------------------------------

    async def run(self) -> None:
        self.metadata.refresh()
        await self._delete_orphans()
        for partition in self._replicas.partitions():
            log = partition.log
            topic_id = self._topic_id_of(partition.topic)
            if log.closed or log.offline or not topic_id:
                continue  # (no id: the metadata does not know the topic yet, nothing to decide)
            if not log.config.remote_storage_enable:
                log.remote_copied_upto = None
                if partition.is_leader and log.config.remote_log_delete_on_disable:
                    await self._delete_tier(partition, topic_id)
                continue
            tier = self.metadata.tier(partition.topic, partition.index, topic_id)
            if partition.is_leader:
                try:
                    await self._lead(partition, tier)
                except Exception as exc:  # metadata topic unavailable, log closed meanwhile
                    _log.warning(
                        "event=remote_task_failed topic=%s partition=%d error=%r",
                        partition.topic, partition.index, str(exc),
                    )  # fmt: skip
            log.remote_copied_upto = tier.copied_upto
            if not log.closed:  # deleted during the copies: its series are gone and stay gone
                self._record_lag(partition, tier)
        self.metrics.sweep(self._topics_with_series())

    def _topics_with_series(self) -> set[str]:
        """Topics whose remote-tier series stay: hosted here, or with remote segments left to
        delete (a deleted topic's delete errors stay visible until its orphans are gone)."""
        hosted = {p.topic for p in self._replicas.partitions() if not p.log.closed}
        return hosted | {topic for (topic, _, _), tier in self.metadata.tiers() if tier.segments}

    async def _delete_tier(self, partition: Partition, topic_id: str) -> None:
        """remote.storage.enable turned off with remote.log.delete.on.disable (KIP-950)."""
        tier = self.metadata.find(partition.topic, partition.index, topic_id)
        for segment in [] if tier is None else list(tier.segments.values()):
            if not await self._delete(segment):
                return

    async def _delete_orphans(self) -> None:
        """Remote segments of deleted topics (no topic of that name and id any more), deleted by
        the leader of the metadata partition holding their events, once seen orphaned on two runs
        in a row, and only while the metadata knows topics at all (the metadata topic itself)."""
        if not self._topic_id_of(METADATA_TOPIC):
            return
        seen, self._orphans_seen = self._orphans_seen, set()
        for key, tier in self.metadata.tiers():
            topic, index, topic_id = key
            if not topic_id or not tier.segments or self._topic_id_of(topic) == topic_id:
                continue
            holder = self._replicas.find(METADATA_TOPIC, self.metadata.partition_of(topic, index))
            if holder is None or not holder.is_leader:
                continue
            self._orphans_seen.add(key)
            if key not in seen:
                continue
            for segment in list(tier.segments.values()):
                if not await self._delete(segment):
                    break

    async def _lead(self, partition: Partition, tier: PartitionTier) -> None:
        topic_id = self._topic_id_of(partition.topic)
        for orphaned in self.metadata.stale(partition.topic, partition.index, topic_id):
            for segment in list(orphaned.segments.values()):  # a deleted topic of this name
                if not await self._delete(segment):
                    return
        await self._expire(partition, tier)
        if partition.log.config.remote_log_copy_disable:
            return
        term = partition.leadership_term
        upper = min(partition.high_watermark, partition.last_stable_offset)
        for candidate in copy_candidates(
            partition.log.segments, copied_upto=tier.copied_upto, upper=upper
        ):
            if not await self._copy(partition, candidate, term):
                return
            partition.log.remote_copied_upto = tier.copied_upto

    async def _copy(self, partition: Partition, candidate: Candidate, term: int) -> bool:
        log = partition.log
        segment = candidate.segment
        end = candidate.next_offset - 1
        epochs = leader_epochs(log, segment.base_offset, end)
        started = RemoteSegment(
            partition.topic, partition.index, uuid.uuid4().hex, segment.base_offset, end,
            segment.max_timestamp, segment.size, epochs, self._node_id, self._clock.time_ms(),
            SegmentState.COPY_SEGMENT_STARTED, self._topic_id_of(partition.topic),
        )  # fmt: skip
        await self.metadata.publish(started)
        self.metrics.count(self.metrics.copy_requests, partition.topic)
        files = dataclasses.replace(
            segment_files(log, candidate, epochs), max_bytes_per_second=self._copy_rate
        )
        try:
            await asyncio.to_thread(self.store.copy_segment, started, files)
        except RemoteStorageError as exc:
            self.metrics.count(self.metrics.copy_errors, partition.topic)
            _log.warning(
                "event=remote_copy_failed topic=%s partition=%d start_offset=%d error=%r",
                partition.topic, partition.index, segment.base_offset, str(exc),
            )  # fmt: skip
            return False
        if not partition.is_leader or partition.leadership_term != term:
            return False  # the next leader deletes this unfinished copy and copies it again
        await self.metadata.publish(started.with_state(
            SegmentState.COPY_SEGMENT_FINISHED, self._clock.time_ms()
        ))  # fmt: skip
        self.metrics.count(self.metrics.copy_bytes, partition.topic, segment.size)
        _log.info(
            "event=remote_copy topic=%s partition=%d start_offset=%d end_offset=%d bytes=%d",
            partition.topic, partition.index, segment.base_offset, end, segment.size,
        )  # fmt: skip
        return True

    async def _expire(self, partition: Partition, tier: PartitionTier) -> None:
        log = partition.log
        copied = tier.copied_upto
        local_only = sum(s.size for s in log.segments if copied is None or s.base_offset >= copied)
        doomed = dangling(tier) + expired_segments(
            tier.finished, config=log.config, now_ms=self._clock.time_ms(),
            log_start_offset=tier.log_start_offset, local_only_bytes=local_only,
        )  # fmt: skip
        expired_upto = -1
        for segment in doomed:
            if not await self._delete(segment):
                return
            if segment.state is SegmentState.COPY_SEGMENT_FINISHED:
                expired_upto = max(expired_upto, segment.next_offset)
        start = tier.start_offset
        new_start = start if start is not None else expired_upto
        if expired_upto > log.log_start_offset and new_start > log.log_start_offset:
            # Remote retention passed the local log start: the local copies go too (Kafka moves
            # the log start offset, which deletes the local segments below it).
            log.delete_records_before(min(new_start, partition.high_watermark))

    async def _delete(self, segment: RemoteSegment) -> bool:
        now = self._clock.time_ms()
        if segment.state is not SegmentState.DELETE_SEGMENT_STARTED:
            await self.metadata.publish(
                segment.with_state(SegmentState.DELETE_SEGMENT_STARTED, now)
            )
        self.metrics.count(self.metrics.delete_requests, segment.topic)
        try:
            await asyncio.to_thread(self.store.delete_segment, segment)
        except RemoteStorageError as exc:
            self.metrics.count(self.metrics.delete_errors, segment.topic)
            _log.warning(
                "event=remote_delete_failed topic=%s partition=%d start_offset=%d error=%r",
                segment.topic, segment.partition, segment.start_offset, str(exc),
            )  # fmt: skip
            return False
        await self.metadata.publish(segment.with_state(
            SegmentState.DELETE_SEGMENT_FINISHED, self._clock.time_ms()
        ))  # fmt: skip
        self.reader.forget(segment.segment_id)
        return True

    def _record_lag(self, partition: Partition, tier: PartitionTier) -> None:
        copied = tier.copied_upto
        pending = [
            s for s in partition.log.segments[:-1] if copied is None or s.next_offset > copied
        ]
        self.metrics.record_lag(
            partition.topic, partition.index, sum(s.size for s in pending), len(pending)
        )

    # -- what handlers ask ------------------------------------------------------------------

    def _find(self, log: Log) -> PartitionTier | None:
        return self.metadata.find(log.topic, log.partition, self._topic_id_of(log.topic))

    def _tier_below(self, log: Log) -> PartitionTier | None:
        """The partition's tier when it holds offsets up to the local log start (no gap)."""
        if not log.config.remote_storage_enable:
            return None
        tier = self._find(log)
        if tier is None:
            return None
        copied = tier.copied_upto
        return tier if copied is not None and copied >= log.log_start_offset else None

    def log_start_offset(self, log: Log) -> int:
        """Kafka's logStartOffset: the remote log start when the remote tier reaches down
        further than the local log, else the local log start."""
        tier = self._tier_below(log)
        start = None if tier is None else tier.start_offset
        return log.log_start_offset if start is None else min(start, log.log_start_offset)

    def last_tiered_offset(self, log: Log) -> int:
        """ListOffsets -5: the highest offset copied to the remote tier, -1 when none."""
        tier = self._find(log)
        copied = None if tier is None else tier.copied_upto
        return -1 if copied is None else copied - 1

    def epoch_of(self, log: Log, offset: int) -> int:
        """The leader epoch of a remote offset (from its segment's epochs), -1 when unknown."""
        tier = self._find(log)
        segment = None if tier is None else tier.segment_for(offset)
        if segment is None:
            return -1
        epochs = [e for e, start in segment.leader_epochs if start <= offset]
        return epochs[-1] if epochs else -1

    def serves(self, log: Log, offset: int) -> bool:
        """True when `offset` is below the local log start and in the remote tier."""
        if offset >= log.log_start_offset:
            return False
        tier = self._tier_below(log)
        start = None if tier is None else tier.start_offset
        return start is not None and offset >= start

    async def read(
        self, log: Log, offset: int, max_bytes: int, *, min_one_batch: bool
    ) -> RemoteRead | None:
        tier = self._tier_below(log)
        if tier is None:
            return None
        self.metrics.count(self.metrics.fetch_requests, log.topic)
        try:
            read = await self.reader.read(tier, offset, max_bytes, min_one_batch=min_one_batch)
        except RemoteStorageError:
            self.metrics.count(self.metrics.fetch_errors, log.topic)
            raise
        if read is not None:
            self.metrics.count(self.metrics.fetch_bytes, log.topic, read.records.size)
        return read

    async def aux_state(self, log: Log, next_offset: int) -> RemoteAuxState | None:
        """A follower restarting at the leader's local log start `next_offset`: the leader
        epochs below it (every earlier remote segment's, then the leader-epoch checkpoint of the
        segment holding `next_offset - 1`) and that segment's producer snapshot, both read from
        the store; None when the metadata this broker folded has no such segment (yet)."""
        self.metadata.refresh()
        tier = self._find(log)
        segment = None if tier is None else tier.segment_for(next_offset - 1)
        if tier is None or segment is None:
            return None
        checkpoint, snapshot = await asyncio.to_thread(self._aux_objects, segment)
        epochs = [e for s in tier.finished if s.start_offset < segment.start_offset
                  for e in s.leader_epochs]  # fmt: skip
        epochs += parse_epoch_checkpoint(checkpoint)
        below = sorted({(o, e) for e, o in epochs if o < next_offset})
        return RemoteAuxState(tuple((e, o) for o, e in below), snapshot)

    def _aux_objects(self, segment: RemoteSegment) -> tuple[bytes, bytes]:
        checkpoint = self.store.fetch_index(segment, IndexKind.LEADER_EPOCH)
        return checkpoint, self.store.fetch_index(segment, IndexKind.PRODUCER_SNAPSHOT)

    async def batch_by_timestamp(self, log: Log, target: int) -> bytes | None:
        """ListOffsets by timestamp below the local log: the first remote batch reaching
        `target` at or after the log start (None when the remote tier has none)."""
        tier = self._tier_below(log)
        start = None if tier is None else tier.start_offset
        if tier is None or start is None:
            return None
        return await self.reader.batch_by_timestamp(tier, target, start)

    async def aborted(
        self, log: Log, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """read_committed: the aborted transactions overlapping a remote read, from the remote
        segments on and then, when the search is not complete, the local ones."""
        tier = self._tier_below(log)
        if tier is None:
            return []
        found, complete = await self.reader.aborted(tier, fetch_offset, upper_bound_offset)
        if not complete and upper_bound_offset > log.log_start_offset:
            found += log.collect_aborted(log.log_start_offset, upper_bound_offset)
        return found

    async def delete_records(self, partition: Partition, offset: int) -> int:
        """DeleteRecords with tiering: below the local log start the remote log start moves
        (committed to the metadata topic, remote segments below it deleted now); returns the
        new log start offset clients see."""
        log = partition.log
        tier = self._tier_below(log)
        if tier is not None and offset > tier.log_start_offset:
            topic_id = self._topic_id_of(log.topic)
            await self.metadata.publish(LogStartEvent(log.topic, log.partition, offset, topic_id))
            await self._expire(partition, tier)
        if offset > log.log_start_offset:
            partition.delete_records_before(offset)
        return self.log_start_offset(log)


def parse_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """(epoch, start offset) entries of a copied leader-epoch checkpoint ("0", count, then one
    "epoch offset" line each, as `copier.segment_files` writes it); RemoteStorageError when
    malformed."""
    try:
        lines = data.decode().split("\n")
        count = int(lines[1])
        entries = []
        for line in lines[2 : 2 + count]:
            epoch, offset = line.split()
            entries.append((int(epoch), int(offset)))
        if len(entries) != count:
            raise ValueError(f"{len(entries)} entries, {count} announced")
        return entries
    except (UnicodeDecodeError, ValueError, IndexError) as exc:
        raise RemoteStorageError(f"unreadable leader-epoch checkpoint: {exc}") from exc
