"""SyncGroup (key 14), versions 0-5 (Pier's brokers serve 0-5): the group id is the tenant's
(RW); READ on the group (Kafka's ACL, GROUP_AUTHORIZATION_FAILED). The leader's assignments are
ConsumerProtocolAssignments when the protocol type is `consumer` (carried from v5): their topics
are prefixed on the way in (bytes that do not parse: INCONSISTENT_GROUP_PROTOCOL, not forwarded)
and the member's assignment in the answer is stripped (topics not the tenant's dropped). Before
v5 the protocol type is unknown: bytes that parse as a consumer assignment are renamed, others
pass unchanged (`groups_common`). Other protocol types pass unchanged. An empty group id is
INVALID_GROUP_ID, as Kafka's coordinator answers. An assignment larger than
`member_size.MAX_MEMBER_BYTES` is INVALID_REQUEST; assignments that would take the tenant's
members past `tenant.max.group.member.bytes` (`member_ledger.py`) are GROUP_MAX_SIZE_REACHED. A
SyncGroup keeps its member alive there while it waits; one from a member this gateway process did
not let join is REBALANCE_IN_PROGRESS, not forwarded (it rejoins here and is charged here). Runs
on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import response
from gateway.kafka.filters.consumer_protocol import MalformedConsumerProtocol
from gateway.kafka.filters.groups_common import assignment_in, assignment_out
from gateway.kafka.filters.member_size import assignment_sizes, sync_group_refusal
from gateway.kafka.member_ledger import NO_LEDGER, Admission

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    if not ctx.allowed("READ", "GROUP", request.group_id):
        return Reply(_error(ctx, ErrorCode.group_authorization_failed))
    if not request.group_id:  # Kafka's coordinator refuses it; prefixed, the brokers would not
        return Reply(_error(ctx, ErrorCode.invalid_group_id))
    if sync_group_refusal(request) is not None:
        return Reply(_error(ctx, ErrorCode.invalid_request))
    kind = getattr(request, "protocol_type", None)
    try:
        assignments = tuple(
            replace(a, assignment=assignment_in(ctx, a.assignment, kind))
            for a in request.assignments
        )
    except MalformedConsumerProtocol:
        return Reply(_error(ctx, ErrorCode.inconsistent_group_protocol))
    group = ctx.namespace.fleet(request.group_id)
    forwarded = replace(request, group_id=group, assignments=assignments)
    if sync_group_refusal(forwarded) is not None:  # the tenant's prefixes made one larger
        return Reply(_error(ctx, ErrorCode.invalid_request))
    members, tenant = ctx.members, ctx.namespace.tenant_id
    if members is not None and not members.knows(tenant, request.group_id, request.member_id):
        return Reply(_error(ctx, ErrorCode.rebalance_in_progress))  # rejoin here, charged here
    admission = _admit(ctx, request, forwarded)
    if admission is None:
        return Reply(_error(ctx, ErrorCode.group_max_size_reached))

    def on_response(answer: Any) -> Any:
        admission.answered(None, answer.error_code)
        answered = getattr(answer, "protocol_type", None) or kind
        return replace(answer, assignment=assignment_out(ctx, answer.assignment, answered))

    return Forward(forwarded, on_response, admission.failed)


def _admit(ctx: FilterContext, request: Any, forwarded: Any) -> Admission | None:
    """The assignments' place under the tenant's member bytes (None: past the limit)."""
    if ctx.members is None:
        return NO_LEDGER
    tenant, sizes = ctx.namespace.tenant_id, assignment_sizes(forwarded)
    generation = request.generation_id
    return ctx.members.sync(tenant, request.group_id, request.member_id, generation, sizes)


def _error(ctx: FilterContext, code: ErrorCode) -> Any:
    return response(
        ctx,
        "SyncGroupResponse",
        error_code=code,
        protocol_type=None,
        protocol_name=None,
        assignment=b"",
    )
