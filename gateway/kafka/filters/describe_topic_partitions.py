"""DescribeTopicPartitions (key 75, v0, KIP-966): topic names and the paging cursor RW, every
answer filtered to the tenant's topics, internal topics never shown.

ACL (Kafka's DescribeTopicPartitionsRequestHandler): DESCRIBE on each topic. A named topic without
it is TOPIC_AUTHORIZATION_FAILED, answered here (no id, no partitions) after the brokers' topics,
and never forwarded; in the all-topics form such a topic is left out. The cursor is checked as
Kafka checks it (its topic must be among the named ones, its partition not negative: otherwise
INVALID_REQUEST for every named topic), then prefixed like every name, so it can only point into
the tenant's namespace.

Paging stays the tenant's: a tenant's fleet names share its prefix, so they sort together and in
the tenant's own order. Named topics are forwarded prefixed. The all-topics form is forwarded as
all topics from the cursor (or from the bare prefix when there is none), with the tenant's prefix
as the request header's name scope (`brokers.wire.headers`): the broker walks the tenant's names
only and stops after the last (a broker that walked on would give others' topics, dropped here; a
next cursor on another tenant's topic means the tenant's names are done: no cursor). A next cursor on a topic
the caller may not DESCRIBE (all-topics form) is replaced by the smallest name after it
(`name + "\\0"`), so it never names the topic. Such hidden topics and the dropped topics still
count against the broker's partition limit, so a page may hold fewer partitions than asked; the
cursor still resumes right. A name the tenant may not use (`topic_name_problem`) that the fleet
does not know is INVALID_TOPIC_EXCEPTION, as Kafka answers an illegal name. Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from brokers.wire.entities import make, request_module, response_module
from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.cluster_view import TOPIC_OPERATIONS, authorized_operations
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.topics_common import stripped

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0
SUCCESSOR = "\0"  # appended to a name: the smallest name sorting after it


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    cursor = request.cursor
    if request.topics:
        return _named(ctx, request)
    if cursor is not None and cursor.partition_index < 0:
        return Reply(response(ctx, "DescribeTopicPartitionsResponse", topics=()))
    start = ctx.namespace.fleet(cursor.topic_name if cursor is not None else "")
    partition = cursor.partition_index if cursor is not None else 0
    upstream = dataclasses.replace(request, cursor=_cursor(ctx, start, partition, request=True))
    return Forward(
        upstream,
        lambda answer: _answer(ctx, answer, refused=()),
        name_scope=ctx.namespace.prefix,
    )


def _named(ctx: FilterContext, request: Any) -> Outcome:
    cursor = request.cursor
    first = cursor.topic_name if cursor is not None else ""
    names = sorted({t.name for t in request.topics if t.name >= first})
    if cursor is not None and (cursor.topic_name not in names or cursor.partition_index < 0):
        return Reply(_invalid_request(ctx, request))
    allowed = [n for n in names if ctx.allowed("DESCRIBE", "TOPIC", n)]
    refused = tuple(
        _topic(ctx, n, ErrorCode.topic_authorization_failed) for n in names if n not in allowed
    )
    if not allowed:
        return Reply(response(ctx, "DescribeTopicPartitionsResponse", topics=refused))
    sent_cursor = None
    if cursor is not None and cursor.topic_name in allowed:
        fleet_start = ctx.namespace.fleet(cursor.topic_name)
        sent_cursor = _cursor(ctx, fleet_start, cursor.partition_index, request=True)
    topics = tuple(_topic_request(ctx, ctx.namespace.fleet(n)) for n in allowed)
    upstream = dataclasses.replace(request, topics=topics, cursor=sent_cursor)
    return Forward(upstream, lambda answer: _answer(ctx, answer, refused))


def _answer(ctx: FilterContext, answer: Any, refused: tuple[Any, ...]) -> Any:
    shown = tuple(
        _shown(ctx, topic)
        for name, topic in stripped(ctx, answer.topics)
        if ctx.allowed("DESCRIBE", "TOPIC", str(name))
    )
    return dataclasses.replace(
        answer, topics=shown + refused, next_cursor=_next_cursor(ctx, answer.next_cursor)
    )


def _next_cursor(ctx: FilterContext, cursor: Any) -> Any:
    """The broker's next cursor in the tenant's names; None once past them (fail closed)."""
    if cursor is None:
        return None
    local = ctx.namespace.local(cursor.topic_name)
    if local is None:
        return None
    if not ctx.allowed("DESCRIBE", "TOPIC", local):
        return _cursor(ctx, local + SUCCESSOR, 0, request=False)
    return _cursor(ctx, local, cursor.partition_index, request=False)


def _shown(ctx: FilterContext, topic: Any) -> Any:
    error = topic.error_code
    if error == ErrorCode.unknown_topic_or_partition and ctx.topic_name_problem(topic.name):
        error = ErrorCode.invalid_topic_exception
    operations = authorized_operations(ctx, "TOPIC", topic.name, TOPIC_OPERATIONS)
    return dataclasses.replace(
        topic, error_code=error, is_internal=False, topic_authorized_operations=operations
    )


def _topic(ctx: FilterContext, name: str, error: ErrorCode) -> Any:
    return entity(
        ctx,
        "DescribeTopicPartitionsResponseTopic",
        error_code=error,
        name=name,
        topic_id=None,
        is_internal=False,
        partitions=(),
    )


def _invalid_request(ctx: FilterContext, request: Any) -> Any:
    """Kafka's answer to a cursor it refuses: every named topic INVALID_REQUEST."""
    topics = tuple(_topic(ctx, t.name, ErrorCode.invalid_request) for t in request.topics)
    return response(ctx, "DescribeTopicPartitionsResponse", topics=topics)


def _cursor(ctx: FilterContext, topic: str, partition: int, *, request: bool) -> Any:
    """A request-side (to the broker) or response-side (to the client) cursor."""
    side = request_module if request else response_module
    module = side(API_KEY, ctx.api_version)
    return make(module, "Cursor", topic_name=topic, partition_index=partition)


def _topic_request(ctx: FilterContext, fleet_name: str) -> Any:
    return make(request_module(API_KEY, ctx.api_version), "TopicRequest", name=fleet_name)
