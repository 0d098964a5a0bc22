"""Heartbeat (key 12): the group id is the tenant's (RW); READ on the group (Kafka's ACL).

Runs on the event loop.
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
    return Forward(dataclasses.replace(request, group_id=fleet_group), unchanged)
