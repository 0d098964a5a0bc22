"""DeleteTopics (key 20, v1–5; CAP 5: v6 names topics by id, which the gateway does not map):
delete the tenant's topics; names RW.

ACL as Kafka's ControllerApis.deleteTopics: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED
(the others are forwarded; with none left, the gateway answers alone). Strict controller mutation
quota from v5 (KIP-599): THROTTLING_QUOTA_EXCEEDED for each topic once the budget is exceeded;
each forwarded topic is charged its partitions (one when the fleet cannot tell). The partitions
of the topics the broker deleted are given back to the tenant's reserved count
(`partition_limit.release`; the ledger's reconcile corrects any it could not tell).
Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.partition_limit import release
from gateway.kafka.filters.topics_common import Batch, stripped, topic_partitions

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 5
FIRST_STRICT_VERSION = 5


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    batch, sent, charges = Batch(), [], 0
    sizes: dict[str, int] = {}  # fleet name -> its partitions now (0 when the fleet cannot tell)
    strict = ctx.api_version >= FIRST_STRICT_VERSION
    for name in request.topic_names:
        if not ctx.allowed("DELETE", "TOPIC", name):
            batch.refuse(name, _result(ctx, name, ErrorCode.topic_authorization_failed, None))
        elif strict and ctx.mutations.exceeded():
            message = "The controller mutation quota is exceeded."
            batch.refuse(name, _result(ctx, name, ErrorCode.throttling_quota_exceeded, message))
        else:
            batch.forward(name)
            sent.append(ctx.namespace.fleet(name))
            sizes[sent[-1]] = await topic_partitions(ctx, sent[-1]) or 0
            charges += sizes[sent[-1]] or 1
    if not batch.forwarded:
        return Reply(response(ctx, "DeleteTopicsResponse", responses=batch.merge(())))
    ctx.mutations.record(charges)

    def on_response(answer: Any) -> Any:
        deleted = {r.name for r in answer.responses if r.error_code == ErrorCode.none}
        release(ctx, sum(n for name, n in sizes.items() if name in deleted))
        return dataclasses.replace(answer, responses=batch.merge(stripped(ctx, answer.responses)))

    return Forward(dataclasses.replace(request, topic_names=tuple(sent)), on_response)


def _result(ctx: FilterContext, name: str, error: ErrorCode, message: str | None) -> Any:
    return entity(ctx, "DeletableTopicResult", name=name, error_code=error, error_message=message)
