"""JoinGroup (key 11, v0–9): join a classic group and wait for the rebalance to form.

The request parks until the coordinator completes the member's future (the join phase ends, a
timeout fires, or an error is known). v0 has no rebalance timeout (the session timeout serves);
v4+ requires a known member id (KIP-394); v5+ carries group instance ids (KIP-345); v9 lets a
restarted static leader skip the assignment. Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.coordinator.joining import JoinRequest
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.group_conversions import client_host, millis
from brokers.handlers.services import GroupService
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 11
FIRST_NULLABLE_PROTOCOL = 7  # protocol_type/protocol_name became nullable


def route(groups: GroupService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        module = response_module(API_KEY, version)
        session_ms = millis(request.session_timeout)
        rebalance = getattr(request, "rebalance_timeout", None)
        join = JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in request.protocols),
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=session_ms if rebalance is None else millis(rebalance),
            client_id=ctx.client_id,
            client_host=client_host(ctx),
            require_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
            reason=getattr(request, "reason", None),
        )
        result = await groups.coordinator.join_group(join)
        blank = "" if version < FIRST_NULLABLE_PROTOCOL else None
        members = tuple(
            make(
                module,
                "JoinGroupResponseMember",
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata,
            )
            for m in result.members
        )
        return make(
            module,
            "JoinGroupResponse",
            throttle_time=throttle(),
            error_code=ErrorCode.none if result.error is None else error_code_for(result.error),
            generation_id=result.generation_id,
            protocol_type=result.protocol_type if result.protocol_type is not None else blank,
            protocol_name=result.protocol_name if result.protocol_name is not None else blank,
            leader=result.leader_id,
            skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=members,
        )

    return Route(API_KEY, 0, 9, handle, name="JoinGroup")
