"""LeaveGroup (key 13), versions 0-5 (Pier's brokers serve 0-5): the group id is the tenant's
(RW); READ on the group (Kafka's ACL: GROUP_AUTHORIZATION_FAILED for the whole request, no
member results); an empty group id is INVALID_GROUP_ID, as Kafka's coordinator answers. Member
ids and instance ids carry no tenant prefix: they pass as they are. A member the coordinator
answers NONE for leaves the tenant's member ledger (`member_ledger.py`; by its member id, by its
instance id only when it named no member id). Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import response, unchanged

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    if not ctx.allowed("READ", "GROUP", request.group_id):
        return Reply(_error(ctx, ErrorCode.group_authorization_failed))
    if not request.group_id:  # Kafka's coordinator refuses it; prefixed, the brokers would not
        return Reply(_error(ctx, ErrorCode.invalid_group_id))
    forwarded = replace(request, group_id=ctx.namespace.fleet(request.group_id))
    members = ctx.members
    if members is None:
        return Forward(forwarded, unchanged)
    tenant, group = ctx.namespace.tenant_id, request.group_id

    def on_response(answer: Any) -> Any:
        if not hasattr(request, "members"):  # v0-2: one member, the answer's error
            if answer.error_code == ErrorCode.none:
                members.left(tenant, group, request.member_id, None)
            return answer
        for member in answer.members if answer.error_code == ErrorCode.none else ():
            if member.error_code == ErrorCode.none:
                members.left(tenant, group, member.member_id, member.group_instance_id)
        return answer

    return Forward(forwarded, on_response)


def _error(ctx: FilterContext, code: ErrorCode) -> Any:
    return response(ctx, "LeaveGroupResponse", error_code=code, members=())
