"""JoinGroup (key 11), versions 0-9 (Pier's brokers serve 0-9): the group id is the tenant's (RW);
READ on the group (Kafka's ACL, GROUP_AUTHORIZATION_FAILED). When `protocol_type` is `consumer`,
each protocol's metadata is a ConsumerProtocolSubscription whose topics (and owned partitions'
topics) are prefixed on the way in, since the brokers read them (offset expiry, OffsetDelete's
GROUP_SUBSCRIBED_TO_TOPIC); metadata that does not parse is refused with
INCONSISTENT_GROUP_PROTOCOL, never forwarded. The members' metadata in the answer (sent to the
leader) is stripped, topics not the tenant's dropped. Other protocol types (e.g. `connect`) pass
their bytes unchanged. An empty group id is INVALID_GROUP_ID, as Kafka's coordinator answers. A
group past the tenant's `tenant.max.groups` (`coordinated_names.py`) is GROUP_AUTHORIZATION_FAILED.
A member that would hold more than `member_size.MAX_MEMBER_BYTES` (protocols and instance id) or
offers more than `MAX_PROTOCOLS` protocols is INVALID_REQUEST; one that would take the tenant's
members past `tenant.max.group.member.bytes` (`member_ledger.py`) is GROUP_MAX_SIZE_REACHED, and
the answer's member id files the member there. A rebalance timeout longer than
`member_ledger.MAX_REBALANCE_S` (30 min, `group.max.session.timeout.ms`'s default) is forwarded as
that: a rebalance, and the members parked in it, last no longer. Runs on the event loop.
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.coordinated_names import NameKind
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import response
from gateway.kafka.filters.consumer_protocol import MalformedConsumerProtocol
from gateway.kafka.filters.groups_common import (
    CONSUMER,
    held_for,
    subscription_in,
    subscription_out,
)
from gateway.kafka.filters.member_size import join_group_charge, join_group_refusal
from gateway.kafka.member_ledger import MAX_REBALANCE_S, NEW_MEMBER_JOIN_S, NO_LEDGER, Admission

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9
FIRST_NULLABLE_PROTOCOL_NAME = 7
ZERO = datetime.timedelta(0)
MAX_REBALANCE = datetime.timedelta(seconds=MAX_REBALANCE_S)


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    if not ctx.allowed("READ", "GROUP", request.group_id):
        return Reply(_error(ctx, ErrorCode.group_authorization_failed))
    if not request.group_id:  # Kafka's coordinator refuses it; prefixed, the brokers would not
        return Reply(_error(ctx, ErrorCode.invalid_group_id))
    if join_group_refusal(request) is not None:
        return Reply(_error(ctx, ErrorCode.invalid_request))
    refused = await ctx.name_refusal(NameKind.GROUP, request.group_id)
    if refused is not None:  # too long, or one group past the tenant's limit
        return Reply(_error(ctx, refused))
    consumer = request.protocol_type == CONSUMER
    protocols = request.protocols
    if consumer:
        try:
            protocols = tuple(
                replace(p, metadata=subscription_in(ctx, p.metadata)) for p in protocols
            )
        except MalformedConsumerProtocol:
            return Reply(_error(ctx, ErrorCode.inconsistent_group_protocol))
    group = ctx.namespace.fleet(request.group_id)
    forwarded = replace(request, group_id=group, protocols=protocols)
    if held_for(getattr(request, "rebalance_timeout", ZERO)) > MAX_REBALANCE_S:
        forwarded = replace(forwarded, rebalance_timeout=MAX_REBALANCE)
    if join_group_refusal(forwarded) is not None:  # the tenant's prefixes made it larger
        return Reply(_error(ctx, ErrorCode.invalid_request))
    admission = _admit(ctx, request, forwarded)
    if admission is None:
        return Reply(_error(ctx, ErrorCode.group_max_size_reached))

    def on_response(answer: Any) -> Any:
        admission.answered(answer.member_id, answer.error_code, answer.leader, answer.generation_id)
        if not consumer:
            return answer
        members = tuple(
            replace(m, metadata=subscription_out(ctx, m.metadata)) for m in answer.members
        )
        return replace(answer, members=members)

    return Forward(forwarded, on_response, admission.failed)


def _admit(ctx: FilterContext, request: Any, forwarded: Any) -> Admission | None:
    """The member's place under the tenant's member bytes (None: past the limit)."""
    if ctx.members is None:
        return NO_LEDGER
    session = forwarded.session_timeout
    rebalance = getattr(forwarded, "rebalance_timeout", session)  # v0: the session timeout
    return ctx.members.join(
        ctx.namespace.tenant_id,
        request.group_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        join_group_charge(forwarded, ctx.caller.client_id),
        held_for(session),
        max(held_for(rebalance), NEW_MEMBER_JOIN_S),
    )


def _error(ctx: FilterContext, code: ErrorCode) -> Any:
    """Kafka's JoinGroupRequest.getErrorResponse: no generation, leader or member."""
    nullable = ctx.api_version >= FIRST_NULLABLE_PROTOCOL_NAME
    return response(
        ctx,
        "JoinGroupResponse",
        error_code=code,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None if nullable else "",
        leader="",
        skip_assignment=False,
        member_id="",
        members=(),
    )
