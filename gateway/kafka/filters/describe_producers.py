"""DescribeProducers (key 61), version 0 (all there is; advertised because the brokers serve it,
as the gateway's table is intersected with theirs): topic names are the tenant's (RW); the answer's topics not
the tenant's are dropped, the others stripped, error messages made safe (`groups_common.message`).
Kafka's ACL: READ on each topic, else its partitions get TOPIC_AUTHORIZATION_FAILED locally while
the rest is forwarded (merged in request order). Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.groups_common import (
    in_request_order,
    message,
    prefixed,
    split_by_acl,
    stripped,
)

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    allowed, refused = split_by_acl(ctx, request.topics, "READ", "TOPIC")
    local = [_refused(ctx, t) for t in refused]
    order = [t.name for t in request.topics]
    if not allowed:
        return Reply(
            response(ctx, "DescribeProducersResponse", topics=in_request_order(local, order))
        )

    def on_response(answer: Any) -> Any:
        topics = [
            replace(t, partitions=tuple(_safe(ctx, p) for p in t.partitions))
            for t in stripped(ctx, answer.topics)
        ]
        return replace(answer, topics=in_request_order(topics + local, order))

    return Forward(replace(request, topics=prefixed(ctx, allowed)), on_response)


def _safe(ctx: FilterContext, partition: Any) -> Any:
    return replace(partition, error_message=message(ctx, partition.error_message))


def _refused(ctx: FilterContext, topic: Any) -> Any:
    partitions = tuple(
        entity(
            ctx,
            "PartitionResponse",
            partition_index=p,
            error_code=ErrorCode.topic_authorization_failed,
            error_message=None,
            active_producers=(),
        )
        for p in topic.partition_indexes
    )
    return entity(ctx, "TopicResponse", name=topic.name, partitions=partitions)
