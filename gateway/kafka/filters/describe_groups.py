"""DescribeGroups (key 15), versions 0-6 (Pier's brokers serve 0-6): group ids are the tenant's
(RW); the answer's groups not the tenant's are dropped, the others stripped. For `consumer`
groups each member's metadata (ConsumerProtocolSubscription) and assignment
(ConsumerProtocolAssignment) are stripped as in JoinGroup/SyncGroup; `client_host` is blanked
(the brokers see the gateway's address, not the client's); `error_message` (v6) is scrubbed.
Kafka's ACL: DESCRIBE on each group, else that group's entry is GROUP_AUTHORIZATION_FAILED,
answered locally while the rest is forwarded (merged in request order). Authorized operations
(v3+, KIP-430) come from the tenant's ACLs, not the brokers'. Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Outcome
from gateway.kafka.filters.common import entity
from gateway.kafka.filters.groups_common import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CONSUMER,
    assignment_out,
    describe_groups,
    group_operations,
    message,
    subscription_out,
)

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    return describe_groups(ctx, request, "groups", "DescribeGroupsResponse", _refused, _described)


def _described(ctx: FilterContext, group: Any, wants_operations: bool) -> Any:
    consumer = group.protocol_type == CONSUMER
    members = tuple(
        replace(
            m,
            client_host="",
            member_metadata=subscription_out(ctx, m.member_metadata)
            if consumer
            else m.member_metadata,
            member_assignment=assignment_out(ctx, m.member_assignment, group.protocol_type),
        )
        for m in group.members
    )
    fields: dict[str, Any] = {"members": members}
    if hasattr(group, "error_message"):
        fields["error_message"] = message(ctx, group.error_message)
    if hasattr(group, "authorized_operations"):
        ok = wants_operations and group.error_code == ErrorCode.none
        ops = group_operations(ctx, group.group_id) if ok else AUTHORIZED_OPERATIONS_OMITTED
        fields["authorized_operations"] = ops
    return replace(group, **fields)


def _refused(ctx: FilterContext, group_id: str) -> Any:
    """Kafka's DescribeGroupsResponse.groupError: unknown state, protocol and operations."""
    return entity(
        ctx,
        "DescribedGroup",
        error_code=ErrorCode.group_authorization_failed,
        error_message=None,
        group_id=group_id,
        group_state="",
        protocol_type="",
        protocol_data="",
        members=(),
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
