"""ListOffsets (key 2, v1–9): offsets of the tenant's partitions by timestamp; topic names RW.

ACL as Kafka's KafkaApis.handleListOffsetRequest: DESCRIBE on each topic, else
TOPIC_AUTHORIZATION_FAILED for each of its partitions (the others are forwarded). The replica id
must be -1 (a consumer): a follower's or the debugging replica's view (-2) is the fleet's own, so
such a request is answered here with CLUSTER_AUTHORIZATION_FAILED for every partition and never
forwarded. Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.topics_common import outcome, split_topics

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 9
CONSUMER_REPLICA_ID = -1


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    def refused(topic: Any, error: ErrorCode) -> Any:
        partitions = tuple(
            entity(
                ctx,
                "ListOffsetsPartitionResponse",
                partition_index=p.partition_index,
                error_code=error,
                timestamp=-1,
                offset=-1,
                leader_epoch=-1,
            )
            for p in topic.partitions
        )
        return entity(ctx, "ListOffsetsTopicResponse", name=topic.name, partitions=partitions)

    if request.replica_id != CONSUMER_REPLICA_ID:
        topics = tuple(refused(t, ErrorCode.cluster_authorization_failed) for t in request.topics)
        return Reply(response(ctx, "ListOffsetsResponse", topics=topics))
    batch, sent = split_topics(ctx, request.topics, "DESCRIBE", refused)
    return outcome(ctx, request, batch, sent, "ListOffsetsResponse", "topics")
