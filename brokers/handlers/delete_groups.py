"""DeleteGroups (key 42, v0–2): remove Empty groups and their committed offsets.

Groups with members answer NON_EMPTY_GROUP; unknown ones GROUP_ID_NOT_FOUND. Tombstones for the
offsets and the group metadata are written before the answer. Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.coordinator.group_admin import delete_groups
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import GroupService
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 42


def route(groups: GroupService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        outcome = await delete_groups(groups.coordinator, list(request.groups_names))
        results = tuple(
            make(
                module,
                "DeletableGroupResult",
                group_id=group_id,
                error_code=ErrorCode.none if error is None else error_code_for(error),
            )
            for group_id, error in outcome
        )
        return make(module, "DeleteGroupsResponse", throttle_time=throttle(), results=results)

    return Route(API_KEY, 0, 2, handle, name="DeleteGroups")
