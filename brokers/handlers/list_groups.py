"""ListGroups (key 16, v0–5): the groups this broker coordinates, with state (v4+) and type (v5).

v4 filters by state (KIP-518), v5 by type (KIP-848); both case-insensitive. Every group here is a
classic group. Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.coordinator.group_admin import list_groups
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import GroupService
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 16
CLASSIC = "classic"


def route(group_service: GroupService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        states = getattr(request, "states_filter", ())
        types = {t.strip().lower() for t in getattr(request, "types_filter", ())}
        error, listed = list_groups(group_service.coordinator, states)
        if types and CLASSIC not in types:
            listed = []
        groups = tuple(
            make(
                module,
                "ListedGroup",
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=CLASSIC,
            )
            for g in listed
        )
        return make(
            module,
            "ListGroupsResponse",
            throttle_time=throttle(),
            error_code=ErrorCode.none if error is None else error_code_for(error),
            groups=groups,
        )

    return Route(API_KEY, 0, 5, handle, name="ListGroups")
