"""What the group and transaction filters share: renaming named entries in and out (dropping
every entry that is not the tenant's: fail closed), splitting entries by ACL, putting forwarded
and locally refused entries back in request order, per-partition error entries, error messages
safe to show, and the consumer-protocol bytes of `consumer`-type groups in both directions.

Embedded bytes: a request's bytes that must be consumer protocol and do not parse raise
`MalformedConsumerProtocol` (the filter refuses the request); a response's copy that does not
parse is blanked (the broker only holds what this gateway forwarded, so anything else is not to
be trusted). When the protocol type is unknown (SyncGroup before v5), bytes that parse are
renamed and others pass unchanged. Empty bytes (no metadata / no assignment) pass as they are.
Pure; thread-safe; runs on the event loop.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from brokers.wire.entities import has_field, response_module
from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.consumer_protocol import (
    MalformedConsumerProtocol,
    rename_assignment,
    rename_subscription,
)

CONSUMER = "consumer"
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def prefixed(ctx: FilterContext, entries: Iterable[Any], field: str = "name") -> tuple[Any, ...]:
    fleet = ctx.namespace.fleet
    return tuple(replace(e, **{field: fleet(getattr(e, field))}) for e in entries)


def stripped(ctx: FilterContext, entries: Iterable[Any], field: str = "name") -> list[Any]:
    """The entries that are the tenant's, with the prefix removed; the others are dropped."""
    kept = []
    for e in entries:
        local = ctx.namespace.local(getattr(e, field))
        if local is not None:
            kept.append(replace(e, **{field: local}))
    return kept


def split_by_acl(
    ctx: FilterContext, entries: Iterable[Any], operation: str, kind: str, field: str = "name"
) -> tuple[list[Any], list[Any]]:
    """(allowed, refused) entries by the caller's `operation` on each entry's `kind` resource."""
    allowed: list[Any] = []
    refused: list[Any] = []
    for e in entries:
        (allowed if ctx.allowed(operation, kind, getattr(e, field)) else refused).append(e)
    return allowed, refused


def in_request_order(
    entries: Iterable[Any], order: Sequence[str], field: str = "name"
) -> tuple[Any, ...]:
    rank: dict[str, int] = {}
    for i, name in enumerate(order):
        rank.setdefault(name, i)
    return tuple(sorted(entries, key=lambda e: rank.get(getattr(e, field), len(order))))


def describe_groups(
    ctx: FilterContext,
    request: Any,
    ids_field: str,
    response_name: str,
    refused: Callable[[FilterContext, str], Any],
    described: Callable[[FilterContext, Any, bool], Any],
) -> Outcome:
    """The describe flow of DescribeGroups and ConsumerGroupDescribe: groups the tenant may not
    DESCRIBE are answered locally (`refused`), the rest forwarded under their fleet names, and the
    answer's entries that are the tenant's stripped, shown with `described` and merged with the
    refused ones in request order."""
    asked = list(getattr(request, ids_field))
    allowed = [g for g in asked if ctx.allowed("DESCRIBE", "GROUP", g)]
    local = [refused(ctx, g) for g in asked if g not in allowed]
    if not allowed:
        return Reply(response(ctx, response_name, groups=tuple(local)))
    wants_operations = bool(getattr(request, "include_authorized_operations", False))

    def on_response(answer: Any) -> Any:
        groups = [
            described(ctx, g, wants_operations)
            for g in stripped(ctx, answer.groups, "group_id")
            if g.group_id in allowed
        ]
        return replace(answer, groups=in_request_order(groups + local, asked, "group_id"))

    fleet_groups = tuple(ctx.namespace.fleet(g) for g in allowed)
    return Forward(replace(request, **{ids_field: fleet_groups}), on_response)


def partition_errors(
    ctx: FilterContext,
    names: tuple[str, str],
    topic: str,
    partitions: Iterable[int],
    code: int,
    **extra: Any,
) -> Any:
    """A response topic entry (`names` = topic and partition entity names) with `code` for each
    partition; `extra` fills the partition entries' other fields."""
    topic_entity, partition_entity = names
    results = tuple(
        entity(ctx, partition_entity, partition_index=p, error_code=code, **extra)
        for p in partitions
    )
    return entity(ctx, topic_entity, name=topic, partitions=results)


def message(ctx: FilterContext, text: str | None) -> str | None:
    """An error message fit for the tenant: prefix stripped, or None if it names anything that
    could be another tenant's (any `<id>_…` word not the tenant's) or an internal topic."""
    return ctx.namespace.scrub(text)


def subscription_in(ctx: FilterContext, metadata: bytes) -> bytes:
    return rename_subscription(metadata, ctx.namespace.fleet) if metadata else metadata


def subscription_out(ctx: FilterContext, metadata: bytes) -> bytes:
    try:
        return rename_subscription(metadata, ctx.namespace.local) if metadata else metadata
    except MalformedConsumerProtocol:
        return b""


def assignment_in(ctx: FilterContext, data: bytes, protocol_type: str | None) -> bytes:
    if not data or (protocol_type is not None and protocol_type != CONSUMER):
        return data
    try:
        return rename_assignment(data, ctx.namespace.fleet)
    except MalformedConsumerProtocol:
        if protocol_type == CONSUMER:
            raise
        return data


def assignment_out(ctx: FilterContext, data: bytes, protocol_type: str | None) -> bytes:
    if not data or (protocol_type is not None and protocol_type != CONSUMER):
        return data
    try:
        return rename_assignment(data, ctx.namespace.local)
    except MalformedConsumerProtocol:
        return b"" if protocol_type == CONSUMER else data


def group_operations(ctx: FilterContext, group: str) -> int:
    """KIP-430 authorized operations of a group, from the tenant's ACLs (Kafka's AclOperation
    codes of the operations a GROUP supports)."""
    codes = {"READ": 3, "DELETE": 6, "DESCRIBE": 8, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11}
    return sum(1 << code for op, code in codes.items() if ctx.allowed(op, "GROUP", group))


def _top_level_ok(ctx: FilterContext, name: str) -> dict[str, ErrorCode]:
    """OffsetDelete answers a top-level error code; OffsetCommit and TxnOffsetCommit have none."""
    module = response_module(ctx.api_key, ctx.api_version)
    return {"error_code": ErrorCode.none} if has_field(module, name, "error_code") else {}


def commit_outcome(
    ctx: FilterContext,
    request: Any,
    response_name: str,
    refusal: ErrorCode | None,
    **fleet_ids: str,
) -> Outcome:
    """OffsetCommit and TxnOffsetCommit: `refusal` (a group or transactional id refused) fails
    every partition; otherwise topics the caller may not READ get TOPIC_AUTHORIZATION_FAILED per
    partition and the rest goes upstream with `fleet_ids` and the topics prefixed."""
    names = (response_name + "Topic", response_name + "Partition")
    order = [t.name for t in request.topics]

    def errors(topics: Iterable[Any], code: ErrorCode) -> list[Any]:
        return [
            partition_errors(ctx, names, t.name, (p.partition_index for p in t.partitions), code)
            for t in topics
        ]

    if refusal is not None:
        topics = tuple(errors(request.topics, refusal))
        return Reply(
            response(ctx, response_name, topics=topics, **_top_level_ok(ctx, response_name))
        )
    allowed, refused = split_by_acl(ctx, request.topics, "READ", "TOPIC")
    local = errors(refused, ErrorCode.topic_authorization_failed)
    if not allowed:
        topics = in_request_order(local, order)
        return Reply(
            response(ctx, response_name, topics=topics, **_top_level_ok(ctx, response_name))
        )

    def on_response(answer: Any) -> Any:
        topics = in_request_order(stripped(ctx, answer.topics) + local, order)
        return replace(answer, topics=topics)

    forwarded = replace(request, topics=prefixed(ctx, allowed), **fleet_ids)
    return Forward(forwarded, on_response)


def held_for(timeout: datetime.timedelta) -> float:
    """A request's timeout in seconds, as long as a coordinator may keep a member by it."""
    return max(0.0, timeout.total_seconds())
