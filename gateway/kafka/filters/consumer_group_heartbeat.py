"""ConsumerGroupHeartbeat (key 68, v0-1, KIP-848): the group id and the subscribed topic names are
the tenant's (prefixed); the owned partitions' topic ids must name the tenant's topics (others are
dropped: fail closed); a SubscribedTopicRegex is rewritten so that it can only match the tenant's
own topics (`consumer_group_regex.to_fleet`; INVALID_REGULAR_EXPRESSION when it does not compile
alone; v0 has no regex). The answer's assignment names only topics the group subscribed to or its regex matched,
all the tenant's, so its topic ids pass; the error message is scrubbed. Kafka's ACL: READ on the group. A member joining (epoch 0) a group past the tenant's
`tenant.max.groups` (`coordinated_names.py`) is GROUP_AUTHORIZATION_FAILED. A subscription
(names, regex, rack, instance id, assignor) over `member_size.MAX_MEMBER_BYTES` is INVALID_REQUEST,
with a message saying so; one that would take the tenant's members past
`tenant.max.group.member.bytes` (`member_ledger.py`: a member joining at epoch 0, or one whose
subscription grows) is GROUP_MAX_SIZE_REACHED; a leave (epoch -1) answered NONE drops the
member there; a heartbeat past the join of a member this gateway process did not let through is
looked up at its coordinator and charged here as described there (`member_adoption.py`), and
only when that cannot be done UNKNOWN_MEMBER_ID, not forwarded, so it rejoins (epoch 0) here and
is charged here. Runs on the event loop.
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.coordinated_names import NameKind
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import response
from gateway.kafka.filters.consumer_group_regex import RefusedRegex, to_fleet
from gateway.kafka.filters.groups_common import message
from gateway.kafka.filters.member_adoption import adopted
from gateway.kafka.filters.member_size import heartbeat_charge, heartbeat_refusal
from gateway.kafka.filters.topics_common import tenant_topics_by_id
from gateway.kafka.member_ledger import CONSUMER_HOLD_S, NO_LEDGER, Admission

LEAVING = -1

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    if not ctx.allowed("READ", "GROUP", request.group_id):
        return _refuse(ctx, request, ErrorCode.group_authorization_failed, None)
    too_large = heartbeat_refusal(request)
    if too_large is not None:
        return _refuse(ctx, request, ErrorCode.invalid_request, too_large)
    if request.member_epoch == 0:  # joining: too long, or one group past the tenant's limit
        refused = await ctx.name_refusal(NameKind.GROUP, request.group_id)
        if refused is not None:
            return _refuse(ctx, request, refused, None)
    regex = getattr(request, "subscribed_topic_regex", None)  # v1+
    if regex:  # librdkafka sends "" for none
        regex = to_fleet(ctx.namespace, regex)
        if isinstance(regex, RefusedRegex):
            return _refuse(ctx, request, ErrorCode.invalid_regular_expression, regex.reason)
    fleet = ctx.namespace.fleet
    topics = request.subscribed_topic_names
    owned = request.topic_partitions
    if owned:
        names = await tenant_topics_by_id(ctx, [e.topic_id for e in owned])
        owned = tuple(e for e in owned if names.get(e.topic_id) is not None)
    forwarded = replace(
        request,
        group_id=fleet(request.group_id),
        subscribed_topic_names=None if topics is None else tuple(fleet(t) for t in topics),
        topic_partitions=owned,
    )
    if regex is not None:
        forwarded = replace(forwarded, subscribed_topic_regex=regex)
    too_large = heartbeat_refusal(forwarded)  # the tenant's prefixes made it larger
    if too_large is not None:
        return _refuse(ctx, request, ErrorCode.invalid_request, too_large)
    if not _known(ctx, request) and not await adopted(ctx, request.group_id, request.member_id):
        return _refuse(ctx, request, ErrorCode.unknown_member_id, _ELSEWHERE)
    admission = _admit(ctx, request, forwarded)
    if admission is None:
        return _refuse(ctx, request, ErrorCode.group_max_size_reached, _PAST_LIMIT)

    def on_response(answer: Any) -> Any:
        _settle(ctx, request, admission, answer)
        return replace(answer, error_message=message(ctx, answer.error_message))

    return Forward(forwarded, on_response, admission.failed)


_PAST_LIMIT = "the tenant's group members would hold more than tenant.max.group.member.bytes"
_ELSEWHERE = "member not joined through this gateway: rejoin"


def _known(ctx: FilterContext, request: Any) -> bool:
    """A member past its join (or leaving for a while, -2) must have joined through this gateway
    process: its heartbeats keep it alive at the coordinator, so it is charged where it beats."""
    members = ctx.members
    if members is None or request.member_epoch in (0, LEAVING):
        return True
    return members.knows(ctx.namespace.tenant_id, request.group_id, request.member_id)


def _admit(ctx: FilterContext, request: Any, forwarded: Any) -> Admission | None:
    """The member's place under the tenant's member bytes (None: past the limit)."""
    members = ctx.members
    if members is None or request.member_epoch == LEAVING:
        return NO_LEDGER
    tenant, group = ctx.namespace.tenant_id, request.group_id
    parts = heartbeat_charge(forwarded, ctx.caller.client_id)
    member_id, instance = request.member_id, request.instance_id
    if request.member_epoch == 0:
        return members.join(tenant, group, member_id, instance, parts, CONSUMER_HOLD_S)
    return members.heartbeat(tenant, group, member_id, instance, parts)


def _settle(ctx: FilterContext, request: Any, admission: Admission, answer: Any) -> None:
    """What the coordinator's answer tells the member ledger."""
    admission.answered(answer.member_id, answer.error_code)
    members = ctx.members
    left = request.member_epoch == LEAVING and answer.error_code == ErrorCode.none
    if members is not None and left:
        tenant, group = ctx.namespace.tenant_id, request.group_id
        members.left(tenant, group, request.member_id, request.instance_id)


def _refuse(ctx: FilterContext, request: Any, code: ErrorCode, text: str | None) -> Outcome:
    return Reply(
        response(
            ctx,
            "ConsumerGroupHeartbeatResponse",
            error_code=code,
            error_message=text,
            member_id=request.member_id or None,
            member_epoch=request.member_epoch,
            heartbeat_interval=datetime.timedelta(0),
            assignment=None,
        )
    )
