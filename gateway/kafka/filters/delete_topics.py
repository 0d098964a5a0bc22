"""DeleteTopics (key 20, v1–6): delete the tenant's topics; names RW, and (v6, KIP-516) topic ids
resolved and checked.

ACL as Kafka's ControllerApis.deleteTopics: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED
(the others are forwarded; with none left, the gateway answers alone). The controller mutation
budget (KIP-599's quota, strict from v5, and the tenant's `tenant.partition.mutations.per.second`
on every version): THROTTLING_QUOTA_EXCEEDED for each topic once the budget is exceeded;
each forwarded topic is charged its partitions (one when the fleet cannot tell). The partitions
of the topics the broker deleted are given back to the tenant's reserved count
(`partition_limit.release`; the ledger's reconcile corrects any it could not tell).
v6 names each topic by name or by id: an id is forwarded as it is (ids are the brokers', never
reused) only when the fleet topic with that id is in the tenant's namespace, else it is answered
UNKNOWN_TOPIC_ID here, exactly as an id nobody has (`topics_common.tenant_topics_by_id`), so a
tenant can never reach another tenant's topic by id. An entry with both or neither is forwarded
for the broker's INVALID_REQUEST (with the name prefixed); one with neither is answered so here.
Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Hashable
from typing import Any

from brokers.wire.entities import make, request_module
from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.partition_limit import release
from gateway.kafka.filters.topics_common import (
    MUTATIONS_EXCEEDED,
    Batch,
    stripped,
    tenant_topics_by_id,
    topic_partition_counts,
)

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6
FIRST_TOPIC_ID_VERSION = 6
Wanted = tuple[str | None, uuid.UUID | None]


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    batch, sent, charges = Batch(), [], 0
    sizes: dict[str, int] = {}  # fleet name -> its partitions now (0 when the fleet cannot tell)
    wanted = _wanted(request)
    by_id = [topic_id for given, topic_id in wanted if given is None and topic_id is not None]
    resolved = await tenant_topics_by_id(ctx, by_id) if by_id else {}
    for index, (given, topic_id) in enumerate(wanted):
        key, name, refused = _resolve(ctx, index, given, topic_id, resolved)
        if refused is not None or name is None:
            batch.refuse(key, refused)
            continue
        if not ctx.allowed("DELETE", "TOPIC", name):
            shown = None if isinstance(key, tuple) else name
            result = _result(ctx, shown, ErrorCode.topic_authorization_failed, None, topic_id)
            batch.refuse(key, result)
        elif ctx.mutations.exceeded():
            message = MUTATIONS_EXCEEDED
            result = _result(ctx, name, ErrorCode.throttling_quota_exceeded, message, topic_id)
            batch.refuse(key, result)
        else:
            batch.forward(name)
            fleet_name = ctx.namespace.fleet(name)
            sent.append((None if isinstance(key, tuple) else fleet_name, topic_id))
            sizes[fleet_name] = 0
    if not batch.forwarded:
        return Reply(response(ctx, "DeleteTopicsResponse", responses=batch.merge(())))
    counts = await topic_partition_counts(ctx, sizes)
    for fleet_name, count in counts.items():
        sizes[fleet_name] = count or 0
        charges += count or 1
    ctx.mutations.record(charges)

    def on_response(answer: Any) -> Any:
        deleted = {r.name for r in answer.responses if r.error_code == ErrorCode.none}
        release(ctx, sum(n for name, n in sizes.items() if name in deleted))
        return dataclasses.replace(answer, responses=batch.merge(stripped(ctx, answer.responses)))

    return Forward(_upstream(ctx, request, sent), on_response)


def _resolve(
    ctx: FilterContext,
    index: int,
    name: str | None,
    topic_id: uuid.UUID | None,
    resolved: dict[uuid.UUID, str | None],
) -> tuple[Hashable, str | None, Any]:
    """(batch key, the tenant's topic name, a local refusal or None) of one entry."""
    if name is not None:
        return name, name, None
    if topic_id is None:  # neither name nor id (the broker's answer, given here)
        message = "Neither topic name nor id were specified."
        refusal = _result(ctx, None, ErrorCode.invalid_request, message)
        return ("neither", index), None, refusal
    key = ("id", topic_id)
    tenant_name = resolved.get(topic_id)
    if tenant_name is None:
        return key, None, _result(ctx, None, ErrorCode.unknown_topic_id, None, topic_id)
    return key, tenant_name, None


def _wanted(request: Any) -> list[Wanted]:
    """(name, id) per requested topic; v1–5 name topics only, v6 either way."""
    wanted: list[Wanted] = [(name, None) for name in getattr(request, "topic_names", ())]
    wanted += [(t.name, t.topic_id) for t in getattr(request, "topics", ())]
    return wanted


def _upstream(ctx: FilterContext, request: Any, sent: list[Wanted]) -> Any:
    if ctx.api_version < FIRST_TOPIC_ID_VERSION:
        return dataclasses.replace(request, topic_names=tuple(n for n, _ in sent if n is not None))
    module = request_module(API_KEY, ctx.api_version)
    states = tuple(make(module, "DeleteTopicState", name=n, topic_id=i) for n, i in sent)
    return dataclasses.replace(request, topics=states)


def _result(
    ctx: FilterContext,
    name: str | None,
    error: ErrorCode,
    message: str | None,
    topic_id: uuid.UUID | None = None,
) -> Any:
    return entity(
        ctx,
        "DeletableTopicResult",
        name=name,
        topic_id=topic_id,
        error_code=error,
        error_message=message,
    )
