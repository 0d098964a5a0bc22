"""ListGroups (key 16, v0–5): the groups this broker coordinates, with state (v4+) and type (v5).

v4 filters by state (KIP-518), v5 by type (KIP-848); both case-insensitive. Classic groups
and KIP-848 consumer groups (type and protocol type `consumer`). A request header's name scope
(`brokers.wire.headers.NAME_SCOPE_TAG`, the gateway's tenant prefix) lists only the ids that start
with it. Runs on the event loop.
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
CONSUMER = "consumer"  # KIP-848 groups (brokers.coordinator.consumer_group)


def route(group_service: GroupService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        states = getattr(request, "states_filter", ())
        types = {t.strip().lower() for t in getattr(request, "types_filter", ())}
        coordinator = group_service.coordinator
        prefix = ctx.header.name_scope or ""
        error, listed = list_groups(coordinator, states, prefix)
        consumer = coordinator.consumer_groups.groups
        # a consumer group's offsets live in a member-less classic group of the same id
        listed = [g for g in listed if g.group_id not in consumer]
        if types and CLASSIC not in types:
            listed = []
        entries = [(g.group_id, g.protocol_type, g.state, CLASSIC) for g in listed]
        if error is None and (not types or CONSUMER in types):
            wanted_states = {s.lower() for s in states}
            scoped = [i for i in consumer if i.startswith(prefix)] if prefix else list(consumer)
            entries += [
                (group_id, CONSUMER, group.state, CONSUMER)
                for group_id, group in ((i, consumer[i]) for i in scoped)
                if coordinator.check(group_id) is None
                and (not wanted_states or group.state.lower() in wanted_states)
            ]
        groups = tuple(
            make(
                module,
                "ListedGroup",
                group_id=group_id,
                protocol_type=protocol_type,
                group_state=state,
                group_type=group_type,
            )
            for group_id, protocol_type, state, group_type in entries
        )
        return make(
            module,
            "ListGroupsResponse",
            throttle_time=throttle(),
            error_code=ErrorCode.none if error is None else error_code_for(error),
            groups=groups,
        )

    return Route(API_KEY, 0, 5, handle, name="ListGroups")
