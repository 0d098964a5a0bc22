"""DeleteRecords (key 21, v0–2): move the log start offset of the tenant's partitions; topic
names RW.

ACL as Kafka's KafkaApis.handleDeleteRecordsRequest: DELETE on each topic, else
TOPIC_AUTHORIZATION_FAILED for each of its partitions (the others are forwarded; with none left,
the gateway answers alone). Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Outcome
from gateway.kafka.filters.common import entity
from gateway.kafka.filters.topics_common import outcome, split_topics

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    def refused(topic: Any, error: ErrorCode) -> Any:
        partitions = tuple(
            entity(
                ctx,
                "DeleteRecordsPartitionResult",
                partition_index=p.partition_index,
                low_watermark=-1,
                error_code=error,
            )
            for p in topic.partitions
        )
        return entity(ctx, "DeleteRecordsTopicResult", name=topic.name, partitions=partitions)

    batch, sent = split_topics(ctx, request.topics, "DELETE", refused)
    return outcome(ctx, request, batch, sent, "DeleteRecordsResponse", "topics")
