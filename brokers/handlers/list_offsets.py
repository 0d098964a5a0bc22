"""ListOffsets (key 2, v1–9): offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3).

-4 (earliest local, KIP-405) is the log start offset and -5 (latest tiered, KIP-1005) finds
nothing, since nothing is tiered. Consumers never see offsets past the high watermark. A timestamp
lookup returns the exact first record with timestamp ≥ the target: the log finds the batch, and
this module decodes only that batch to find the record (off the hot path). Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import Replicas
from brokers.records.builder import read_batch
from brokers.replication.partition import Partition
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 2
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    replicas: Replicas


def route(replicas: Replicas) -> Route:
    broker = _Services(replicas)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        topics = tuple(
            make(
                module,
                "ListOffsetsTopicResponse",
                name=topic.name,
                partitions=tuple(_lookup(module, broker, topic.name, p) for p in topic.partitions),
            )
            for topic in request.topics
        )
        return make(module, "ListOffsetsResponse", throttle_time=throttle(), topics=topics)

    return Route(API_KEY, 1, 9, handle, name="ListOffsets")


def _lookup(module: ModuleType, broker: _Services, topic: str, wanted: Any) -> Any:
    index = wanted.partition_index
    try:
        partition = broker.replicas.get(topic, index)
        partition.check_epoch(getattr(wanted, "current_leader_epoch", -1))
        offset, timestamp = _resolve(partition, wanted.timestamp)
    except Exception as exc:
        return make(
            module,
            "ListOffsetsPartitionResponse",
            partition_index=index,
            error_code=error_code_for(exc),
        )
    epoch = partition.log.leader_epoch_cache.epoch_for_offset(offset) if offset >= 0 else None
    return make(
        module,
        "ListOffsetsPartitionResponse",
        partition_index=index,
        error_code=ErrorCode.none,
        timestamp=timestamp,
        offset=offset,
        leader_epoch=-1 if epoch is None else epoch,
    )


def _resolve(partition: Partition, target: int) -> tuple[int, int]:
    log = partition.log
    if target in (EARLIEST, EARLIEST_LOCAL):
        return log.log_start_offset, -1
    if target == LATEST:
        return partition.high_watermark, -1
    if target == LATEST_TIERED:
        return -1, -1
    if target == MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
    else:
        found = log.offset_for_timestamp(target)
    if found is None or found.offset >= partition.high_watermark:
        return -1, -1
    return _exact_record(partition, found.offset, target)


def _exact_record(partition: Partition, batch_offset: int, target: int) -> tuple[int, int]:
    """The log answers per batch; find the record inside it (the first with timestamp ≥ target,
    or for max-timestamp the first record holding the batch's max timestamp)."""
    read = partition.log.read(
        batch_offset, 1, max_offset=partition.high_watermark, min_one_batch=True
    )
    if read.region is None:
        return -1, -1
    header, records = read_batch(read.region.read())
    if header.is_log_append_time:
        return header.base_offset, header.max_timestamp
    wanted = header.max_timestamp if target == MAX_TIMESTAMP else target
    for record in records:
        timestamp = header.base_timestamp + record.timestamp_delta
        if timestamp >= wanted:
            return header.base_offset + record.offset_delta, timestamp
    return header.last_offset, header.max_timestamp
