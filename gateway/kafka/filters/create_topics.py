"""CreateTopics (key 19, v2–7): create topics in the tenant's namespace, within its limits.

Per topic, in order: CREATE on the cluster or the topic (Kafka's KafkaApis/ControllerApis,
else TOPIC_AUTHORIZATION_FAILED); a legal name that fits the tenant's `max_topic_length`
(`gateway.policy.names`, else INVALID_TOPIC_EXCEPTION with Kafka's message); no manual
assignment (INVALID_REQUEST: placement is the fleet's); configs within the allowlist
(`topic_configs`); the controller mutation budget (KIP-599's quota, strict from v6, and the
tenant's `tenant.partition.mutations.per.second` on every version: THROTTLING_QUOTA_EXCEEDED);
the tenant's partition limit, counting the broker default for -1:
the topics left are RESERVED in the tenant store in one transaction before anything is
forwarded (`partition_limit`; POLICY_VIOLATION for those that do not fit), and the reservation
is settled with what the broker really created when it answers (or, when its answer never
comes, with what the fleet shows once the request's `timeout` has passed:
`partition_limit.settle_on_failure`). Forwarded topics are charged to
the mutation budget unless `validate_only`. Response: names stripped, the broker's collision
message (it names the other topic) replaced, broker-level config sources shown as defaults (v5+),
topic ids (v7) of the tenant's own topics kept. Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.cluster_view import CLUSTER_NAME
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.partition_limit import (
    grace_s,
    refusals,
    reserve,
    settle,
    settle_on_failure,
)
from gateway.kafka.filters.topic_configs import refusal, shown_source
from gateway.kafka.filters.topics_common import (
    MUTATIONS_EXCEEDED,
    Batch,
    stripped,
    topic_partition_counts,
)

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7
COLLISION = "Topic '{}' collides with an existing topic ('.' and '_' collide in topic names)."


def _static_refusal(ctx: FilterContext, topic: Any) -> tuple[ErrorCode, str | None] | None:
    if not (
        ctx.allowed("CREATE", "CLUSTER", CLUSTER_NAME) or ctx.allowed("CREATE", "TOPIC", topic.name)
    ):
        return ErrorCode.topic_authorization_failed, None
    problem = ctx.topic_name_problem(topic.name)  # the policy stage's rule (fullmatch, ≤ 249)
    if problem is not None:
        return ErrorCode.invalid_topic_exception, problem
    if topic.assignments:
        return ErrorCode.invalid_request, "Manual partition assignments are not supported."
    return refusal(((c.name, c.value) for c in topic.configs), ctx.limits)


def _early_refusal(ctx: FilterContext, topic: Any) -> tuple[ErrorCode, str | None] | None:
    refused = _static_refusal(ctx, topic)
    if refused is None and ctx.mutations.exceeded():
        return ErrorCode.throttling_quota_exceeded, MUTATIONS_EXCEEDED
    return refused


def _size(ctx: FilterContext, topic: Any) -> int:
    return int(topic.num_partitions) if topic.num_partitions > 0 else ctx.fleet.default_partitions


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    early = [_early_refusal(ctx, topic) for topic in request.topics]
    wanted = [
        _size(ctx, t) for t, refused in zip(request.topics, early, strict=True) if not refused
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
        sizes[topic.name] = _size(ctx, topic)
    if not batch.forwarded:
        return Reply(response(ctx, "CreateTopicsResponse", topics=batch.merge(())))
    if not request.validate_only:
        ctx.mutations.record(sum(sizes.values()))

    def on_response(answer: Any) -> Any:
        shown = [(name, _shown(ctx, topic)) for name, topic in stripped(ctx, answer.topics)]
        created = 0 if request.validate_only else _created(shown, sizes)
        settle(ctx, grant, created)
        return dataclasses.replace(answer, topics=batch.merge(shown))

    async def exist_now() -> int:  # the answer never came: what the fleet shows was created
        if request.validate_only:
            return 0
        counts = await topic_partition_counts(ctx, [ctx.namespace.fleet(n) for n in sizes])
        return sum(count or 0 for count in counts.values())

    failed = settle_on_failure(ctx, grant, exist_now, grace_s(request.timeout))
    return Forward(dataclasses.replace(request, topics=tuple(sent)), on_response, failed)


def _created(shown: list[tuple[Any, Any]], sizes: dict[str, int]) -> int:
    """The partitions the broker created: those of each topic it answered without an error."""
    done = {name for name, topic in shown if topic.error_code == ErrorCode.none}
    return sum(size for name, size in sizes.items() if name in done)


def _shown(ctx: FilterContext, topic: Any) -> Any:
    changes: dict[str, Any] = {}
    if topic.error_code == ErrorCode.invalid_topic_exception and "collides" in (
        topic.error_message or ""
    ):
        changes["error_message"] = COLLISION.format(topic.name)
    if getattr(topic, "configs", None):
        changes["configs"] = tuple(
            dataclasses.replace(c, config_source=shown_source(c.config_source))
            for c in topic.configs
        )
    return dataclasses.replace(topic, **changes)


def _result(ctx: FilterContext, name: str, error: ErrorCode, message: str | None) -> Any:
    return entity(
        ctx,
        "CreatableTopicResult",
        name=name,
        topic_id=None,
        error_code=error,
        error_message=message,
        topic_config_error_code=0,
        num_partitions=-1,
        replication_factor=-1,
        configs=(),
    )
