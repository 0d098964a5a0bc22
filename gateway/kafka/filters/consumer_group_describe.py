"""ConsumerGroupDescribe (key 69, v0-1, KIP-848): group ids are the tenant's (RW); the answer's
groups not the tenant's are dropped, the others stripped, and in each member the subscribed topic
names and both assignments' topic names are stripped (entries not the tenant's dropped: fail
closed), the subscribed regex turned back into the tenant's (`consumer_group_regex.to_tenant`); `client_host` is blanked (the brokers see the gateway's address); error messages are
scrubbed. Kafka's ACL: DESCRIBE on each group, else that group's entry is
GROUP_AUTHORIZATION_FAILED, answered locally. Authorized operations come from the tenant's ACLs.
Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Outcome
from gateway.kafka.filters.common import entity
from gateway.kafka.filters.consumer_group_regex import to_tenant
from gateway.kafka.filters.groups_common import (
    AUTHORIZED_OPERATIONS_OMITTED,
    describe_groups,
    group_operations,
    message,
    stripped,
)

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    return describe_groups(
        ctx, request, "group_ids", "ConsumerGroupDescribeResponse", _refused, _described
    )


def _described(ctx: FilterContext, group: Any, wants_operations: bool) -> Any:
    local = ctx.namespace.local
    members = tuple(
        replace(
            m,
            client_host="",
            subscribed_topic_names=tuple(
                n for n in (local(t) for t in m.subscribed_topic_names) if n is not None
            ),
            subscribed_topic_regex=to_tenant(ctx.namespace, m.subscribed_topic_regex),
            assignment=_assignment(ctx, m.assignment),
            target_assignment=_assignment(ctx, m.target_assignment),
        )
        for m in group.members
    )
    ok = wants_operations and group.error_code == ErrorCode.none
    ops = group_operations(ctx, group.group_id) if ok else AUTHORIZED_OPERATIONS_OMITTED
    return replace(
        group,
        members=members,
        error_message=message(ctx, group.error_message),
        authorized_operations=ops,
    )


def _assignment(ctx: FilterContext, assignment: Any) -> Any:
    return replace(
        assignment, topic_partitions=tuple(stripped(ctx, assignment.topic_partitions, "topic_name"))
    )


def _refused(ctx: FilterContext, group_id: str) -> Any:
    return entity(
        ctx,
        "DescribedGroup",
        error_code=ErrorCode.group_authorization_failed,
        error_message=None,
        group_id=group_id,
        group_state="",
        group_epoch=-1,
        assignment_epoch=-1,
        assignor_name="",
        members=(),
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
