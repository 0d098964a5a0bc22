"""Heartbeat (key 12): the group id is the tenant's (RW); READ on the group (Kafka's ACL).

A heartbeat keeps its member alive in the tenant's member ledger (`member_ledger.py`); an
UNKNOWN_MEMBER_ID answer drops it there. Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import response, unchanged
from gateway.kafka.member_ledger import GONE

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    if not ctx.allowed("READ", "GROUP", request.group_id):
        return Reply(
            response(ctx, "HeartbeatResponse", error_code=ErrorCode.group_authorization_failed)
        )
    fleet_group = ctx.namespace.fleet(request.group_id)
    forwarded = dataclasses.replace(request, group_id=fleet_group)
    members = ctx.members
    if members is None:
        return Forward(forwarded, unchanged)
    tenant, group, member_id = ctx.namespace.tenant_id, request.group_id, request.member_id
    members.seen(tenant, group, member_id)

    def on_response(answer: Any) -> Any:
        if answer.error_code in GONE:
            members.left(tenant, group, member_id, None)
        return answer

    return Forward(forwarded, on_response)
