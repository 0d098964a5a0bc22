"""ListOffsets (key 2, v1–9): offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3).

Owns: answering as Kafka's ReplicaManager.fetchOffset / Partition.fetchOffsetForTimestamp /
UnifiedLog.fetchOffsetByTimestamp do, leader epochs included (v4+, KIP-320):
- earliest (-2): the log start offset, which with tiered storage (KIP-405) is the remote log
  start when the remote tier reaches below the local log (epoch from the remote segment's
  leader epochs); earliest local (-4): the local log start. Both with the epoch of the first
  leader-epoch entry if it starts at or below the local log start;
- latest (-1): the last fetchable offset (the high watermark for consumers, the last stable
  offset for read_committed ones (isolation_level 1, v2+), the log end for a replica or
  debugging request) with the partition's current leader epoch;
- latest tiered (-5, KIP-1005): the highest offset copied to the remote tier (-1 when none or
  when the topic is not tiered), with its leader epoch;
- a timestamp (≥ 0) whose first record lies below the local log: found in the remote tier's
  segments (time index, then whole batches), as Kafka's findOffsetByTimestamp does;
- a timestamp (≥ 0) or max timestamp (-3, KIP-734): the exact first record with timestamp ≥ the
  target at or above the log start offset (or the first holding the largest timestamp, even
  below the log start when DeleteRecords passed it, as Kafka answers from the segment) and the
  leader epoch of the batch holding it; none (offset -1) when there is no such record below the last fetchable offset (so, as in
  Kafka's fetchOffsetForTimestamp, read_committed lookups stop at the last stable offset). The
  log finds the batch; only that batch is decoded, off the hot path.
A special value newer than the request version (-3 before v7, -4 before v8, -5 before v9) and any
other negative one are UNSUPPORTED_VERSION; a partition named twice is INVALID_REQUEST; requests
other than the debugging replica's (-2) go to the leader only (else NOT_LEADER_OR_FOLLOWER).
While a new leader's high watermark still lags the start of its epoch, latest and timestamp
lookups are OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5, KIP-207). Runs on the event loop.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import Replicas
from brokers.records.builder import read_batch
from brokers.replication.errors import NotLeaderOrFollowerError
from brokers.replication.partition import Partition
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.tiered.remote_log_manager import RemoteLogManager
from brokers.tiered.store import RemoteStorageError
from brokers.wire.errors import ErrorCode

API_KEY = 2
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID = -1, -2
NO_EPOCH = -1
FIRST_OFFSET_NOT_AVAILABLE_VERSION = 5
_MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


class _OffsetNotAvailableError(Exception):
    """The leader's high watermark lags the start offset of its epoch (KIP-207)."""


@dataclass(frozen=True, slots=True)
class _Found:
    offset: int
    timestamp: int = -1
    leader_epoch: int = NO_EPOCH


_NOTHING = _Found(-1)


@dataclass(frozen=True, slots=True)
class _Asker:
    version: int
    replica_id: int
    read_committed: bool = False

    @property
    def is_client(self) -> bool:
        return self.replica_id == CONSUMER_REPLICA_ID


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    replicas: Replicas
    tiered: RemoteLogManager | None = None


def route(replicas: Replicas, tiered: RemoteLogManager | None = None) -> Route:
    broker = _Services(replicas, tiered)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        read_committed = getattr(request, "isolation_level", 0) == 1
        asker = _Asker(ctx.api_version, request.replica_id, read_committed)
        named = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
        remote = await _remote_hits(broker, request)
        topics = tuple(
            make(
                module,
                "ListOffsetsTopicResponse",
                name=topic.name,
                partitions=tuple(
                    _error(module, p.partition_index, ErrorCode.invalid_request)
                    if named[topic.name, p.partition_index] > 1
                    else _lookup(module, broker, asker, topic.name, p, remote.get((topic.name, p)))
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        )
        return make(module, "ListOffsetsResponse", throttle_time=throttle(), topics=topics)

    return Route(API_KEY, 1, 9, handle, name="ListOffsets")


async def _remote_hits(broker: _Services, request: Any) -> dict[tuple[str, Any], _Found]:
    """Timestamp lookups the remote tier answers (KIP-405): the first record reaching the
    timestamp when it lies below the local log, found in the remote segments (store reads on
    worker threads); the local log answers the rest."""
    hits: dict[tuple[str, Any], _Found] = {}
    tiered = broker.tiered
    if tiered is None:
        return hits
    for topic in request.topics:
        for wanted in topic.partitions:
            partition = broker.replicas.find(topic.name, wanted.partition_index)
            if wanted.timestamp < 0 or partition is None or not partition.is_leader:
                continue
            log = partition.log
            if not log.config.remote_storage_enable:
                continue
            try:
                batch = await tiered.batch_by_timestamp(log, wanted.timestamp)
            except RemoteStorageError:
                continue  # the local log answers, as when the remote tier is empty
            if batch is not None:
                start = tiered.log_start_offset(log)
                hits[topic.name, wanted] = _exact_in(batch, wanted.timestamp, start)
    return hits


def _lookup(
    module: ModuleType, broker: _Services, asker: _Asker, topic: str, wanted: Any,
    remote: _Found | None = None,
) -> Any:  # fmt: skip
    index = wanted.partition_index
    if wanted.timestamp < 0 and asker.version < _MIN_VERSION.get(wanted.timestamp, 1 << 15):
        return _error(module, index, ErrorCode.unsupported_version)
    try:
        partition = broker.replicas.get(topic, index)
        partition.check_epoch(getattr(wanted, "current_leader_epoch", NO_EPOCH))
        if asker.replica_id != DEBUGGING_REPLICA_ID and not partition.is_leader:
            raise NotLeaderOrFollowerError(f"{topic}-{index}")
        found = remote or _resolve(partition, wanted.timestamp, asker, broker.tiered)
    except _OffsetNotAvailableError:
        code = ErrorCode.offset_not_available
        if asker.version < FIRST_OFFSET_NOT_AVAILABLE_VERSION:
            code = ErrorCode.leader_not_available
        return _error(module, index, code)
    except Exception as exc:
        return _error(module, index, error_code_for(exc))
    return make(
        module,
        "ListOffsetsPartitionResponse",
        partition_index=index,
        error_code=ErrorCode.none,
        timestamp=found.timestamp,
        offset=found.offset,
        leader_epoch=found.leader_epoch,
    )


def _error(module: ModuleType, index: int, code: ErrorCode) -> Any:
    return make(
        module,
        "ListOffsetsPartitionResponse",
        partition_index=index,
        error_code=code,
        timestamp=-1,
        offset=-1,
        leader_epoch=NO_EPOCH,
    )


def _resolve(
    partition: Partition, target: int, asker: _Asker, tiered: RemoteLogManager | None = None
) -> _Found:
    log = partition.log
    if target == EARLIEST and tiered is not None:
        start = tiered.log_start_offset(log)
        if start < log.log_start_offset:
            return _Found(start, -1, tiered.epoch_of(log, start))
    if target in (EARLIEST, EARLIEST_LOCAL):
        first = log.leader_epoch_cache.earliest_entry()
        epoch = first[0] if first is not None and first[1] <= log.log_start_offset else NO_EPOCH
        return _Found(log.log_start_offset, -1, epoch)
    if target == LATEST_TIERED:
        last = -1 if tiered is None else tiered.last_tiered_offset(log)
        return _NOTHING if last < 0 else _Found(last, -1, tiered_epoch(tiered, log, last))
    last_fetchable = _last_fetchable(partition, asker)
    lagging = asker.is_client and _epoch_start(partition) > partition.high_watermark
    if target == LATEST:
        if lagging:
            raise _OffsetNotAvailableError
        return _Found(last_fetchable, -1, partition.leader_epoch)
    batch = (
        log.max_timestamp_offset() if target == MAX_TIMESTAMP else log.offset_for_timestamp(target)
    )
    if batch is None or batch.offset >= last_fetchable:
        if lagging:
            raise _OffsetNotAvailableError
        return _NOTHING
    return _exact_record(partition, batch.offset, target, last_fetchable)


def tiered_epoch(tiered: RemoteLogManager | None, log: Any, offset: int) -> int:
    return NO_EPOCH if tiered is None else tiered.epoch_of(log, offset)


def _last_fetchable(partition: Partition, asker: _Asker) -> int:
    """Kafka's lastFetchableOffset: by isolation level for consumers, the log end otherwise."""
    if not asker.is_client:
        return partition.log.log_end_offset
    return partition.last_stable_offset if asker.read_committed else partition.high_watermark


def _epoch_start(partition: Partition) -> int:
    """Where the leader's current epoch starts (-1 when unknown): Kafka's leaderEpochStartOffset."""
    latest = partition.log.leader_epoch_cache.latest_entry()
    if latest is None or latest[0] != partition.leader_epoch:
        return -1
    return latest[1]


def _exact_record(partition: Partition, batch_offset: int, target: int, upper: int) -> _Found:
    """The log answers per batch; find the record inside it (the first with timestamp ≥ target,
    or for max-timestamp the first record holding the batch's max timestamp). As Kafka's
    fetchOffsetByTimestamp: a timestamp lookup never answers below the log start offset
    (DeleteRecords may have moved it inside the batch), but max-timestamp answers from the
    segment's record even when DeleteRecords has since moved the log start past it."""
    max_timestamp = target == MAX_TIMESTAMP
    read = partition.log.read(
        batch_offset, 1, max_offset=upper, min_one_batch=True, below_log_start=max_timestamp
    )
    if read.region is None:
        return _NOTHING
    start = -1 if max_timestamp else partition.log.log_start_offset
    return _exact_in(read.region.read(), target, start)


def _exact_in(batch: bytes, target: int, start: int) -> _Found:
    """The record of `batch` a lookup of `target` (a timestamp or MAX_TIMESTAMP) answers, at or
    above `start` (-1: anywhere)."""
    max_timestamp = target == MAX_TIMESTAMP
    header, records = read_batch(batch)
    epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else NO_EPOCH
    if header.is_log_append_time:
        return _Found(max(header.base_offset, start), header.max_timestamp, epoch)
    wanted = header.max_timestamp if max_timestamp else target
    for record in records:
        timestamp = header.base_timestamp + record.timestamp_delta
        offset = header.base_offset + record.offset_delta
        if timestamp >= wanted and offset >= start:
            return _Found(offset, timestamp, epoch)
    return _Found(header.last_offset, header.max_timestamp, epoch)
