"""OffsetFetch (key 9), versions 1-9 (CAP 9: v10 names topics by id; Pier's brokers serve 1-9):
group ids and topic names are the tenant's (RW); answers stripped, groups and topics not the
tenant's dropped. v1-7 carry one group, v8+ `groups[]`. Null topics (= all the group's) are
forwarded as null, and the answer keeps only the tenant's topics the caller may DESCRIBE (Kafka
omits the others silently). Kafka's ACLs: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED:
per partition in v1, top-level in v2-7, the group's entry in v8+), DESCRIBE on each named topic
(else TOPIC_AUTHORIZATION_FAILED per partition, offset -1, while the rest is forwarded; merged
back in request order). Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.groups_common import (
    in_request_order,
    partition_errors,
    prefixed,
    split_by_acl,
    stripped,
)

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9
FIRST_TOP_LEVEL_ERROR_VERSION = 2
FIRST_MULTI_GROUP_VERSION = 8
Plan = tuple[Any, list[Any]]  # (requested topics or None, local topic errors)


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    if ctx.api_version >= FIRST_MULTI_GROUP_VERSION:
        return _groups(ctx, request)
    names = ("OffsetFetchResponseTopic", "OffsetFetchResponsePartition")
    if not ctx.allowed("DESCRIBE", "GROUP", request.group_id):
        code = ErrorCode.group_authorization_failed
        if ctx.api_version >= FIRST_TOP_LEVEL_ERROR_VERSION:
            return Reply(response(ctx, "OffsetFetchResponse", error_code=code, topics=()))
        topics = tuple(_errors(ctx, names, t, code) for t in request.topics)
        return Reply(response(ctx, "OffsetFetchResponse", topics=topics))
    topics, local = _plan(ctx, request.topics, names)
    plan = (request.topics, local)
    if request.topics is not None and local and not topics:
        answer = _answer_topics(ctx, (), plan)
        return Reply(response(ctx, "OffsetFetchResponse", error_code=ErrorCode.none, topics=answer))
    forwarded = replace(request, group_id=ctx.namespace.fleet(request.group_id), topics=topics)
    return Forward(
        forwarded, lambda answer: replace(answer, topics=_answer_topics(ctx, answer.topics, plan))
    )


def _groups(ctx: FilterContext, request: Any) -> Outcome:
    names = ("OffsetFetchResponseTopics", "OffsetFetchResponsePartitions")
    local_groups: list[Any] = []
    forwarded: list[Any] = []
    plans: dict[str, Plan] = {}
    for group in request.groups:
        gid = group.group_id
        if not ctx.allowed("DESCRIBE", "GROUP", gid):
            code = ErrorCode.group_authorization_failed
            local_groups.append(_group(ctx, gid, (), code))
            continue
        topics, local = _plan(ctx, group.topics, names)
        if group.topics is not None and local and not topics:
            answer = _answer_topics(ctx, (), (group.topics, local))
            local_groups.append(_group(ctx, gid, answer, ErrorCode.none))
            continue
        plans[gid] = (group.topics, local)
        forwarded.append(replace(group, group_id=ctx.namespace.fleet(gid), topics=topics))
    order = [g.group_id for g in request.groups]
    if not forwarded:
        return Reply(response(ctx, "OffsetFetchResponse", groups=tuple(local_groups)))

    def on_response(answer: Any) -> Any:
        groups = [
            replace(g, topics=_answer_topics(ctx, g.topics, plans[g.group_id]))
            for g in stripped(ctx, answer.groups, "group_id")
            if g.group_id in plans
        ]
        return replace(answer, groups=in_request_order(groups + local_groups, order, "group_id"))

    return Forward(replace(request, groups=tuple(forwarded)), on_response)


def _group(ctx: FilterContext, group_id: str, topics: Any, code: ErrorCode) -> Any:
    return entity(
        ctx, "OffsetFetchResponseGroup", group_id=group_id, topics=topics, error_code=code
    )


def _errors(ctx: FilterContext, names: tuple[str, str], topic: Any, code: ErrorCode) -> Any:
    return partition_errors(
        ctx,
        names,
        topic.name,
        topic.partition_indexes,
        code,
        committed_offset=-1,
        committed_leader_epoch=-1,
        metadata="",
    )


def _plan(ctx: FilterContext, topics: Any, names: tuple[str, str]) -> tuple[Any, list[Any]]:
    """(topics to forward, prefixed, or None for all; local TOPIC_AUTHORIZATION_FAILED entries)."""
    if topics is None:
        return None, []
    allowed, refused = split_by_acl(ctx, topics, "DESCRIBE", "TOPIC")
    code = ErrorCode.topic_authorization_failed
    return prefixed(ctx, allowed), [_errors(ctx, names, t, code) for t in refused]


def _answer_topics(ctx: FilterContext, topics: Any, plan: Plan) -> tuple[Any, ...]:
    requested, local = plan
    kept = stripped(ctx, topics)
    if requested is None:
        kept = [t for t in kept if ctx.allowed("DESCRIBE", "TOPIC", t.name)]
    return in_request_order(kept + local, [t.name for t in requested or ()])
