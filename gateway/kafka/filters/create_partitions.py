"""CreatePartitions (key 37, v0–3): grow the tenant's topics within its partition limit; names RW.

Per topic, in order: ALTER on the topic (Kafka's KafkaApis/ControllerApis, else
TOPIC_AUTHORIZATION_FAILED); no manual assignment (INVALID_REQUEST: placement is the fleet's);
the strict controller mutation quota from v3 (KIP-599: THROTTLING_QUOTA_EXCEEDED); the tenant's
partition limit (POLICY_VIOLATION). `count` is the new total, so a topic grows by count minus
its current partitions (`Fleet.topic_partitions`; when unknown, the whole count is assumed).
Forwarded growth is charged to the mutation budget unless `validate_only`. Response names are
stripped and messages made safe. Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.topics_common import Batch, over_limit, stripped, topic_partitions

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3
FIRST_STRICT_VERSION = 3


def _refusal(ctx: FilterContext, topic: Any) -> tuple[ErrorCode, str | None] | None:
    if not ctx.allowed("ALTER", "TOPIC", topic.name):
        return ErrorCode.topic_authorization_failed, None
    if topic.assignments:
        return ErrorCode.invalid_request, "Manual partition assignments are not supported."
    if ctx.api_version >= FIRST_STRICT_VERSION and ctx.mutations.exceeded():
        return ErrorCode.throttling_quota_exceeded, "The controller mutation quota is exceeded."
    return None


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    batch, sent, charges = Batch(), [], 0
    in_use: int | None = None
    for topic in request.topics:
        refused = _refusal(ctx, topic)
        growth = 0
        if refused is None:
            fleet_name = ctx.namespace.fleet(topic.name)
            current = await topic_partitions(ctx, fleet_name)
            growth = max(0, topic.count - (current or 0))
            in_use = await ctx.fleet.tenant_partitions(ctx.namespace) if in_use is None else in_use
            message = over_limit(ctx, in_use + charges, growth)
            refused = None if message is None else (ErrorCode.policy_violation, message)
        if refused is not None:
            batch.refuse(topic.name, _result(ctx, topic.name, *refused))
            continue
        batch.forward(topic.name)
        sent.append(dataclasses.replace(topic, name=fleet_name))
        charges += growth
    if not batch.forwarded:
        return Reply(response(ctx, "CreatePartitionsResponse", results=batch.merge(())))
    if not request.validate_only:
        ctx.mutations.record(charges)

    def on_response(answer: Any) -> Any:
        return dataclasses.replace(answer, results=batch.merge(stripped(ctx, answer.results)))

    return Forward(dataclasses.replace(request, topics=tuple(sent)), on_response)


def _result(ctx: FilterContext, name: str, error: ErrorCode, message: str | None) -> Any:
    return entity(
        ctx, "CreatePartitionsTopicResult", name=name, error_code=error, error_message=message
    )
