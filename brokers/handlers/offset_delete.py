"""OffsetDelete (key 47, v0): remove a group's committed offsets for some partitions.

Refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) for topics the group's members subscribe to,
and for the whole request (NON_EMPTY_GROUP) while a non-consumer group is active. Unknown topics
answer UNKNOWN_TOPIC_OR_PARTITION. Tombstones are written before the response.
Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import GroupService, MetadataView
from brokers.replication.errors import UnknownTopicOrPartitionError
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 47


def _code(error: Exception | None) -> ErrorCode:
    return ErrorCode.none if error is None else error_code_for(error)


def route(groups: GroupService, metadata: MetadataView) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        outcome: dict[tuple[str, int], Exception | None] = {}
        known: list[tuple[str, list[int]]] = []
        for topic in request.topics:
            indexes = [p.partition_index for p in topic.partitions]
            if metadata.topic(topic.name) is None:
                outcome.update({(topic.name, i): UnknownTopicOrPartitionError() for i in indexes})
            else:
                known.append((topic.name, indexes))
        error, results = await groups.coordinator.delete_offsets(request.group_id, known)
        outcome.update({(t, p): e for t, p, e in results})
        topics = ()
        if error is None:
            topics = tuple(
                make(
                    module,
                    "OffsetDeleteResponseTopic",
                    name=t.name,
                    partitions=tuple(
                        make(
                            module,
                            "OffsetDeleteResponsePartition",
                            partition_index=p.partition_index,
                            error_code=_code(outcome.get((t.name, p.partition_index))),
                        )
                        for p in t.partitions
                    ),
                )
                for t in request.topics
            )
        return make(
            module,
            "OffsetDeleteResponse",
            error_code=_code(error),
            throttle_time=throttle(),
            topics=topics,
        )

    return Route(API_KEY, 0, 0, handle, name="OffsetDelete")
