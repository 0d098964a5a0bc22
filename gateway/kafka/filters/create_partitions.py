"""CreatePartitions (key 37, v0–3): grow the tenant's topics within its partition limit; names RW.

Per topic, in order: ALTER on the topic (Kafka's KafkaApis/ControllerApis, else
TOPIC_AUTHORIZATION_FAILED); no manual assignment (INVALID_REQUEST: placement is the fleet's);
the controller mutation budget (KIP-599's quota, strict from v3, and the tenant's
`tenant.partition.mutations.per.second` on every version: THROTTLING_QUOTA_EXCEEDED); the tenant's
partition limit: the growth of every topic left is reserved in the tenant store in one transaction
before anything is forwarded (`partition_limit`; POLICY_VIOLATION for what does not fit) and
settled with the growth the broker made when it answers (or, when its answer never comes, with
the growth the fleet shows once the request's `timeout` has passed). `count` is the new
total, so a topic grows by count minus its current partitions (`Fleet.topic_partitions`; when
unknown, the whole count is assumed). Forwarded growth is charged to the mutation budget unless `validate_only`. Response names are
stripped and messages made safe. Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.partition_limit import (
    grace_s,
    refusals,
    reserve,
    settle,
    settle_on_failure,
)
from gateway.kafka.filters.topics_common import (
    MUTATIONS_EXCEEDED,
    Batch,
    stripped,
    topic_partition_counts,
)

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


def _refusal(ctx: FilterContext, topic: Any) -> tuple[ErrorCode, str | None] | None:
    if not ctx.allowed("ALTER", "TOPIC", topic.name):
        return ErrorCode.topic_authorization_failed, None
    if topic.assignments:
        return ErrorCode.invalid_request, "Manual partition assignments are not supported."
    if ctx.mutations.exceeded():
        return ErrorCode.throttling_quota_exceeded, MUTATIONS_EXCEEDED
    return None


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    early = [_refusal(ctx, topic) for topic in request.topics]
    growth: dict[str, int] = {}
    before: dict[str, int] = {}
    asked = [
        ctx.namespace.fleet(t.name) for t, no in zip(request.topics, early, strict=True) if not no
    ]
    currents = await topic_partition_counts(ctx, asked)
    for topic, refused in zip(request.topics, early, strict=True):
        if refused is None:  # `count` is the new total: the growth is what is reserved
            current = currents[ctx.namespace.fleet(topic.name)]
            before[topic.name] = current or 0
            growth[topic.name] = max(0, topic.count - (current or 0))
    wanted = [
        growth[t.name] for t, refused in zip(request.topics, early, strict=True) if not refused
    ]
    grant = await reserve(ctx, wanted)
    over = iter(refusals(grant, wanted))
    batch, sent, sizes = Batch(), [], {}
    for topic, first in zip(request.topics, early, strict=True):
        refused = first or next(over)
        if refused is not None:
            batch.refuse(topic.name, _result(ctx, topic.name, *refused))
            continue
        batch.forward(topic.name)
        sent.append(dataclasses.replace(topic, name=ctx.namespace.fleet(topic.name)))
        sizes[topic.name] = growth[topic.name]
    if not batch.forwarded:
        return Reply(response(ctx, "CreatePartitionsResponse", results=batch.merge(())))
    if not request.validate_only:
        ctx.mutations.record(sum(sizes.values()))

    def on_response(answer: Any) -> Any:
        shown = list(stripped(ctx, answer.results))
        done = {name for name, result in shown if result.error_code == ErrorCode.none}
        created = 0 if request.validate_only else sum(sizes[n] for n in done if n in sizes)
        settle(ctx, grant, created)
        return dataclasses.replace(answer, results=batch.merge(shown))

    async def grown_now() -> int:  # the answer never came: the growth the fleet shows
        if request.validate_only:
            return 0
        nows = await topic_partition_counts(ctx, [ctx.namespace.fleet(n) for n in sizes])
        grown = 0
        for name, size in sizes.items():
            now = nows[ctx.namespace.fleet(name)] or 0
            grown += min(size, max(0, now - before[name]))
        return grown

    failed = settle_on_failure(ctx, grant, grown_now, grace_s(request.timeout))
    return Forward(dataclasses.replace(request, topics=tuple(sent)), on_response, failed)


def _result(ctx: FilterContext, name: str, error: ErrorCode, message: str | None) -> Any:
    return entity(
        ctx, "CreatePartitionsTopicResult", name=name, error_code=error, error_message=message
    )
