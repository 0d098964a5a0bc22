"""AlterPartitionReassignments (key 45, v0–1, KIP-455; v1 adds KIP-860's replication-factor guard).

Owns: answering on the active controller. Each partition either gets a reassignment to its
target replicas (replacing one in flight) or, with null replicas, its reassignment cancelled.
The answer comes once the controller has STARTED the moves (Kafka answers the same way; progress
is seen through ListPartitionReassignments). Per-partition errors are domain errors mapped by
`handlers.errors`: INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
UNKNOWN_TOPIC_OR_PARTITION. A broker that is not the controller answers NOT_CONTROLLER at the top
level. Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Protocol

from brokers.controller import ControllerError, TopicPartition
from brokers.handlers.build import by_topic, make, response_module, throttle
from brokers.handlers.errors import error_code_for, error_message_for
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 45
Outcomes = Mapping[TopicPartition, Exception | None]


class Reassigner(Protocol):
    async def alter_partition_reassignments(
        self,
        targets: Mapping[tuple[str, int], Sequence[int] | None],
        *,
        allow_replication_factor_change: bool = True,
    ) -> Outcomes: ...


def route(controller: Reassigner) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        allow = bool(getattr(request, "allow_replication_factor_change", True))
        targets = {
            (topic.name, int(p.partition_index)): (
                None if p.replicas is None else tuple(int(b) for b in p.replicas)
            )
            for topic in request.topics
            for p in topic.partitions
        }
        try:
            outcomes = await controller.alter_partition_reassignments(
                targets, allow_replication_factor_change=allow
            )
        except ControllerError as exc:  # NOT_CONTROLLER or another code, never a closed connection
            return _response(module, {}, exc, allow)
        return _response(module, outcomes, None, allow)

    return Route(API_KEY, 0, 1, handle, name="AlterPartitionReassignments")


def _response(
    module: ModuleType, outcomes: Outcomes, failure: Exception | None, allow: bool
) -> Any:
    def result(partition: int, exc: Exception | None) -> Any:
        return make(
            module,
            "ReassignablePartitionResponse",
            partition_index=partition,
            error_code=ErrorCode.none if exc is None else error_code_for(exc),
            error_message=None if exc is None else error_message_for(exc),
        )

    return make(
        module,
        "AlterPartitionReassignmentsResponse",
        throttle_time=throttle(),
        allow_replication_factor_change=allow,
        error_code=ErrorCode.none if failure is None else error_code_for(failure),
        error_message=None if failure is None else error_message_for(failure),
        responses=tuple(
            make(module, "ReassignableTopicResponse", name=topic, partitions=parts)
            for topic, parts in by_topic(outcomes.items(), result)
        ),
    )
