"""Heartbeat (key 12, v0–4): keep a member's session; learn of rebalances and fencing.

A classic member of a non-empty KIP-848 consumer group is told to rejoin when its assignment
must change (`consumer_group_migration.heartbeat`). Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from kio.schema.heartbeat.v0.request import HeartbeatRequest as HeartbeatRequestV0
from kio.schema.heartbeat.v1.request import HeartbeatRequest as HeartbeatRequestV1
from kio.schema.heartbeat.v2.request import HeartbeatRequest as HeartbeatRequestV2
from kio.schema.heartbeat.v3.request import HeartbeatRequest as HeartbeatRequestV3
from kio.schema.heartbeat.v4.request import HeartbeatRequest as HeartbeatRequestV4

from brokers.coordinator import consumer_group_migration as mixed
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import GroupService
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 12
HeartbeatRequest = (
    HeartbeatRequestV0 | HeartbeatRequestV1 | HeartbeatRequestV2 | HeartbeatRequestV3
    | HeartbeatRequestV4
)  # fmt: skip


def route(groups: GroupService) -> Route:
    async def handle(ctx: RequestContext, request: HeartbeatRequest) -> Any:
        coordinator = groups.coordinator
        group = await mixed.route(coordinator, request.group_id)
        if group is not None:
            error = mixed.heartbeat(
                coordinator.consumer_groups, group, request.member_id, request.generation_id
            )
        else:
            error = coordinator.heartbeat(
                request.group_id,
                request.member_id,
                getattr(request, "group_instance_id", None),
                request.generation_id,
            )
        return make(
            response_module(API_KEY, ctx.api_version),
            "HeartbeatResponse",
            throttle_time=throttle(),
            error_code=ErrorCode.none if error is None else error_code_for(error),
        )

    return Route(API_KEY, 0, 4, handle, name="Heartbeat")
