"""SyncGroup (key 14, v0–5): the leader hands in the assignment; every member gets its own.

Followers park until the leader's assignment is stored in `__consumer_offsets`. From v5 the
protocol type and name must match the group's (INCONSISTENT_GROUP_PROTOCOL otherwise).
A classic member of a non-empty KIP-848 consumer group gets the partitions it may own now
(`consumer_group_migration.sync`). Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.coordinator import consumer_group_migration as mixed
from brokers.coordinator.group_coordinator import SyncRequest
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import GroupService
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 14


def route(groups: GroupService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        sync = SyncRequest(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            protocol_type=getattr(request, "protocol_type", None),
            protocol_name=getattr(request, "protocol_name", None),
            assignments={a.member_id: a.assignment for a in request.assignments},
        )
        group = await mixed.route(groups.coordinator, request.group_id)
        if group is not None:
            result = mixed.sync(
                groups.coordinator.consumer_groups, group, sync.member_id, sync.generation_id,
                sync.protocol_type, sync.protocol_name,
            )  # fmt: skip
        else:
            result = await groups.coordinator.sync_group(sync)
        return make(
            module,
            "SyncGroupResponse",
            throttle_time=throttle(),
            error_code=ErrorCode.none if result.error is None else error_code_for(result.error),
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )

    return Route(API_KEY, 0, 5, handle, name="SyncGroup")
