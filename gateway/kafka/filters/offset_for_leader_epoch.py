"""OffsetForLeaderEpoch (key 23, v2–4, KIP-101/KIP-320): end offsets of leader epochs of the
tenant's partitions; topic names RW.

ACL as Kafka's KafkaApis.handleOffsetForLeaderEpochRequest: DESCRIBE on each topic, else
TOPIC_AUTHORIZATION_FAILED for each of its partitions (the others are forwarded). The replica id
(v3+) must be -1 (consumer) or -2 (debugging): a follower's request (≥ 0) needs CLUSTER_ACTION,
which a tenant never has, so it is answered here with CLUSTER_AUTHORIZATION_FAILED for every
partition and never forwarded. Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.topics_common import outcome, split_topics

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4
CLIENT_REPLICA_IDS = (-1, -2)


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    def refused(topic: Any, error: ErrorCode) -> Any:
        partitions = tuple(
            entity(
                ctx,
                "EpochEndOffset",
                error_code=error,
                partition=p.partition,
                leader_epoch=-1,
                end_offset=-1,
            )
            for p in topic.partitions
        )
        return entity(ctx, "OffsetForLeaderTopicResult", topic=topic.topic, partitions=partitions)

    if getattr(request, "replica_id", -1) not in CLIENT_REPLICA_IDS:
        topics = tuple(refused(t, ErrorCode.cluster_authorization_failed) for t in request.topics)
        return Reply(response(ctx, "OffsetForLeaderEpochResponse", topics=topics))
    batch, sent = split_topics(ctx, request.topics, "DESCRIBE", refused, "topic")
    return outcome(ctx, request, batch, sent, "OffsetForLeaderEpochResponse", "topics", "topic")
