"""ListPartitionReassignments (key 46, v0, KIP-455): the partitions whose replicas are moving.

Owns: answering on the active controller with, per moving partition, the full replica set and
the replicas being added and removed (all of them for null topics, else among those asked for;
partitions that are not moving or do not exist are left out, as Kafka does). A broker that is
not the controller answers NOT_CONTROLLER at the top level. Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from brokers.controller import ControllerError, ReplicaAssignment, TopicPartition
from brokers.handlers.build import by_topic, make, response_module, throttle
from brokers.handlers.errors import error_code_for, error_message_for
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 46


class ReassignmentLister(Protocol):
    async def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None = None
    ) -> Mapping[TopicPartition, ReplicaAssignment]: ...


def route(controller: ReassignmentLister) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        wanted = (
            None
            if request.topics is None
            else [(t.name, int(p)) for t in request.topics for p in t.partition_indexes]
        )
        try:
            moving = await controller.list_partition_reassignments(wanted)
        except ControllerError as exc:  # NOT_CONTROLLER or another code, never a closed connection
            return make(
                module,
                "ListPartitionReassignmentsResponse",
                throttle_time=throttle(),
                error_code=error_code_for(exc),
                error_message=error_message_for(exc),
                topics=(),
            )

        def ongoing(partition: int, assignment: Any) -> Any:
            return make(
                module,
                "OngoingPartitionReassignment",
                partition_index=partition,
                replicas=assignment.replicas,
                adding_replicas=assignment.adding,
                removing_replicas=assignment.removing,
            )

        return make(
            module,
            "ListPartitionReassignmentsResponse",
            throttle_time=throttle(),
            error_code=ErrorCode.none,
            error_message=None,
            topics=tuple(
                make(module, "OngoingTopicReassignment", name=topic, partitions=parts)
                for topic, parts in by_topic(moving.items(), ongoing)
            ),
        )

    return Route(API_KEY, 0, 0, handle, name="ListPartitionReassignments")
