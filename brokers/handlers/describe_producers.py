"""DescribeProducers (key 61, v0, KIP-664): the active producers of each named partition.

Owns: answering as Kafka's KafkaApis/ReplicaManager do, from the producer state of the local
replica (`ProducerStateManager.active_producers`): producer id, epoch, last sequence (-1 before
any batch), last timestamp, coordinator epoch and the first offset of the open transaction (-1:
none). Kafka answers from any local replica, leader or follower (the admin client sends to the
leader unless told a broker id), so this does too. An illegal topic name is
INVALID_TOPIC_EXCEPTION; a partition the cluster has but this broker holds no replica of is
NOT_LEADER_OR_FOLLOWER (the admin client then finds the leader again); a partition the cluster
does not have is UNKNOWN_TOPIC_OR_PARTITION. Depends on `broker.replicas` (the local replicas)
and, only to tell those two errors apart, `broker.metadata`. Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.services import MetadataView, Replicas
from brokers.log.producer_state.entry import ProducerStateEntry
from brokers.replication.errors import InvalidTopicError
from brokers.replication.topic_names import validate_topic_name
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 61
NO_TXN_START_OFFSET = -1


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    replicas: Replicas
    metadata: MetadataView


def route(replicas: Replicas, metadata: MetadataView) -> Route:
    broker = _Services(replicas, metadata)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        topics = tuple(
            make(
                module,
                "TopicResponse",
                name=topic.name,
                partitions=tuple(
                    _partition(module, broker, topic.name, index)
                    for index in topic.partition_indexes
                ),
            )
            for topic in request.topics
        )
        return make(module, "DescribeProducersResponse", throttle_time=throttle(), topics=topics)

    return Route(API_KEY, 0, 0, handle, name="DescribeProducers")


def _partition(module: ModuleType, broker: _Services, topic: str, index: int) -> Any:
    try:
        validate_topic_name(topic)
    except InvalidTopicError as exc:
        return _error(module, index, ErrorCode.invalid_topic_exception, str(exc))
    replica = broker.replicas.find(topic, index)
    if replica is None:
        if broker.metadata.partition(topic, index) is not None:
            return _error(module, index, ErrorCode.not_leader_or_follower, None)
        return _error(module, index, ErrorCode.unknown_topic_or_partition, None)
    producers = replica.log.producer_state.active_producers()
    return make(
        module,
        "PartitionResponse",
        partition_index=index,
        error_code=ErrorCode.none,
        error_message=None,
        active_producers=tuple(_producer(module, producers[pid]) for pid in sorted(producers)),
    )


def _producer(module: ModuleType, entry: ProducerStateEntry) -> Any:
    txn_start = entry.current_txn_first_offset
    return make(
        module,
        "ProducerState",
        producer_id=entry.producer_id,
        producer_epoch=entry.producer_epoch,
        last_sequence=entry.last_sequence,
        last_timestamp=entry.last_timestamp,
        coordinator_epoch=entry.coordinator_epoch,
        current_txn_start_offset=NO_TXN_START_OFFSET if txn_start is None else txn_start,
    )


def _error(module: ModuleType, index: int, code: ErrorCode, message: str | None) -> Any:
    return make(
        module,
        "PartitionResponse",
        partition_index=index,
        error_code=code,
        error_message=message,
        active_producers=(),
    )
