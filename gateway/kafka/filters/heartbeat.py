"""Heartbeat (key 12): the group id is the tenant's (RW); READ on the group (Kafka's ACL).

A heartbeat keeps its member alive in the tenant's member ledger (`member_ledger.py`); one of a
member this gateway process did not let through (it joined through another) is answered
REBALANCE_IN_PROGRESS and not forwarded, so the member rejoins here and is charged here. Runs on
the event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import response, unchanged

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
    if not members.knows(tenant, group, member_id):
        return Reply(response(ctx, "HeartbeatResponse", error_code=ErrorCode.rebalance_in_progress))
    members.seen(tenant, group, member_id)
    return Forward(forwarded, unchanged)
