"""CreatePartitions (key 37, v0–3): grow a topic's partition count; never shrink it.

Owns: Kafka's checks (ControllerApis / ReplicationControlManager.createPartitions): a topic named
twice is INVALID_REQUEST, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, a count that is not an
increase INVALID_PARTITIONS; explicit assignments must number exactly the new partitions and each
must be valid for this cluster (the same rules as CreateTopics: only this broker can hold a
replica). `validate_only` checks without creating. Runs on the event loop.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from brokers.common.config import BrokerConfig
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import InvalidRequestError, error_code_for, error_message_for
from brokers.handlers.replica_assignment import check_replicas
from brokers.handlers.services import MetadataView, TopicAdmin
from brokers.replication.errors import (
    InvalidReplicaAssignmentError,
    UnknownTopicOrPartitionError,
)
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 37
MAX_ITEMS = 10_000  # topics per request, and assignments per topic


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    config: BrokerConfig
    metadata: MetadataView
    topics: TopicAdmin
    zookeeper_mode: bool


def route(
    config: BrokerConfig, metadata: MetadataView, topics: TopicAdmin, zookeeper_mode: bool
) -> Route:
    broker = _Services(config, metadata, topics, zookeeper_mode)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        with broker.topics.batch():  # one registry write per request
            module = response_module(API_KEY, ctx.api_version)
            counts = Counter(topic.name for topic in request.topics)
            results = []
            for topic in request.topics:
                try:
                    if len(request.topics) > MAX_ITEMS:
                        raise InvalidRequestError(f"More than {MAX_ITEMS} topics in one request")
                    if counts[topic.name] > 1:
                        raise InvalidRequestError("Duplicate topic name.")
                    _grow(broker, topic, request.validate_only)
                except Exception as exc:
                    results.append(_result(module, topic.name, exc))
                    continue
                results.append(_result(module, topic.name, None))
            response = make(
                module, "CreatePartitionsResponse", throttle_time=throttle(), results=tuple(results)
            )
        await broker.topics.flushed()  # the registry on disk before the answer
        return response

    return Route(API_KEY, 0, 3, handle, name="CreatePartitions")


def _grow(broker: _Services, topic: Any, validate_only: bool) -> None:
    meta = broker.metadata.topic(topic.name)
    if meta is None:
        raise UnknownTopicOrPartitionError(f"Topic '{topic.name}' does not exist.")
    # The registry checks the count first (not an increase, over the limits), as Kafka does.
    broker.topics.create_partitions(topic.name, topic.count, validate_only=True)
    manual = None
    if topic.assignments is not None:
        existing = len(meta.partitions)
        factor = len(next(iter(meta.partitions.values())).replicas)
        _check_assignments(broker, topic.assignments, topic.count - existing, factor)
        manual = {existing + i: list(a.broker_ids) for i, a in enumerate(topic.assignments)}
    if not validate_only:
        broker.topics.create_partitions(topic.name, topic.count, assignment=manual)


def _check_assignments(broker: _Services, assignments: Any, additional: int, factor: int) -> None:
    if len(assignments) > MAX_ITEMS:
        raise InvalidRequestError(f"More than {MAX_ITEMS} partition assignments for one topic")
    if len(assignments) != additional:
        raise InvalidReplicaAssignmentError(
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(assignments)} assignment(s) were specified."
        )
    for assignment in assignments:
        # New partitions keep the topic's replication factor, as in Kafka.
        check_replicas(broker, assignment.broker_ids, factor)


def _result(module: ModuleType, name: str, exc: Exception | None) -> Any:
    return make(
        module,
        "CreatePartitionsTopicResult",
        name=name,
        error_code=ErrorCode.none if exc is None else error_code_for(exc),
        error_message=None if exc is None else error_message_for(exc),
    )
