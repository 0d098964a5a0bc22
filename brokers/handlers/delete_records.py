"""DeleteRecords (key 21, v0–2): move partitions' log start offsets forward.

Owns: Kafka's per-partition rules (ReplicaManager.deleteRecordsOnLocalLog, Partition.
deleteRecordsOnLeader): internal topics are refused (INVALID_TOPIC_EXCEPTION), a topic whose
cleanup.policy lacks `delete` is a POLICY_VIOLATION, offset -1 means the high watermark, a
negative offset or one past the high watermark is OFFSET_OUT_OF_RANGE. The answer's low
watermark is the partition's new log start offset. With this broker as the only replica the
deletion is complete when the log moves, so the request timeout is never waited on. With
tiered storage (KIP-405) an offset below the local log start moves the remote log start
(brokers.tiered.remote_log_manager), and the low watermark is that log start. A partition
named twice keeps the last offset given, as Kafka's map of partitions does. Runs on the event
loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import InvalidRequestError, error_code_for
from brokers.handlers.services import MetadataView, Replicas
from brokers.log.errors import OffsetOutOfRangeError
from brokers.replication.errors import (
    InvalidTopicError,
    NotLeaderOrFollowerError,
    PolicyViolationError,
    UnknownTopicOrPartitionError,
)
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.tiered.remote_log_manager import RemoteLogManager
from brokers.wire.errors import ErrorCode

API_KEY = 21
MAX_ITEMS = 10_000  # partitions per request
HIGH_WATERMARK = -1
INVALID_LOW_WATERMARK = -1


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    metadata: MetadataView
    replicas: Replicas
    tiered: RemoteLogManager | None = None


def route(
    metadata: MetadataView, replicas: Replicas, tiered: RemoteLogManager | None = None
) -> Route:
    broker = _Services(metadata, replicas, tiered)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        wanted: dict[str, dict[int, int]] = {}
        for topic in request.topics:
            offsets = wanted.setdefault(topic.name, {})
            for partition in topic.partitions:
                offsets[partition.partition_index] = partition.offset
        too_many = sum(len(offsets) for offsets in wanted.values()) > MAX_ITEMS
        topics = []
        for name, offsets in wanted.items():
            results = [
                await _partition(module, broker, name, index, offset, too_many)
                for index, offset in offsets.items()
            ]
            topics.append(
                make(module, "DeleteRecordsTopicResult", name=name, partitions=tuple(results))
            )
        return make(module, "DeleteRecordsResponse", throttle_time=throttle(), topics=tuple(topics))

    return Route(API_KEY, 0, 2, handle, name="DeleteRecords")


async def _partition(
    module: ModuleType, broker: _Services, topic: str, index: int, offset: int, too_many: bool
) -> Any:
    try:
        if too_many:
            raise InvalidRequestError(f"More than {MAX_ITEMS} partitions in one request")
        low_watermark = await _delete_before(broker, topic, index, offset)
    except Exception as exc:
        return _result(module, index, INVALID_LOW_WATERMARK, error_code_for(exc))
    return _result(module, index, low_watermark, ErrorCode.none)


async def _delete_before(broker: _Services, topic: str, index: int, offset: int) -> int:
    meta = broker.metadata.topic(topic)
    if meta is not None and meta.is_internal:
        raise InvalidTopicError(f"Cannot delete records of internal topic {topic}")
    if broker.metadata.partition(topic, index) is None:
        raise UnknownTopicOrPartitionError(f"{topic}-{index}")
    partition = broker.replicas.get(topic, index)
    if not partition.is_leader:
        raise NotLeaderOrFollowerError(f"Leader not local for partition {topic}-{index}")
    if not partition.log.config.delete:
        raise PolicyViolationError(
            f"Records of partition {topic}-{index} can not be deleted due to the configured policy"
        )
    high_watermark = partition.high_watermark
    target = high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0:
        raise OffsetOutOfRangeError(
            f"The offset {target} for partition {topic}-{index} is not valid"
        )
    if target > high_watermark:
        raise OffsetOutOfRangeError(
            f"Cannot increment the log start offset to {target} of partition {topic}-{index} "
            f"since it is larger than the high watermark {high_watermark}"
        )
    if broker.tiered is not None and partition.log.config.remote_storage_enable:
        # Below the local log start the remote log start moves (KIP-405); the answer is the
        # log start clients see, remote tier included.
        return await broker.tiered.delete_records(partition, target)
    partition.delete_records_before(target)
    # The low watermark is the lowest log start offset over the replicas: ours alone here.
    return partition.log.log_start_offset


def _result(module: ModuleType, index: int, low_watermark: int, code: ErrorCode) -> Any:
    return make(
        module,
        "DeleteRecordsPartitionResult",
        partition_index=index,
        low_watermark=low_watermark,
        error_code=code,
    )
