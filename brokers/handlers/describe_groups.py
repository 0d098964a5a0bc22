"""DescribeGroups (key 15, v0–6): state, protocol and members of each group.

Members' metadata and assignments are filled only while the group is Stable (Kafka's summary).
An unknown group is described as Dead; from v6 it also carries GROUP_ID_NOT_FOUND and a message
(KIP-1043). v3+ may ask for the authorized operations (this broker authorizes everything here:
Read, Delete, Describe). Runs on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from brokers.coordinator.errors import GroupIdNotFoundError
from brokers.coordinator.group_admin import describe_group
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import GroupService
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

if TYPE_CHECKING:
    from types import ModuleType

    from brokers.coordinator.results import GroupSummary

API_KEY = 15
FIRST_NOT_FOUND_VERSION = 6
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # Read, Delete, Describe (AclOperation bits)


def route(group_service: GroupService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        wants_ops = bool(getattr(request, "include_authorized_operations", False))
        groups = tuple(
            _described(
                module, ctx.api_version, describe_group(group_service.coordinator, g), wants_ops
            )
            for g in request.groups
        )
        return make(module, "DescribeGroupsResponse", throttle_time=throttle(), groups=groups)

    return Route(API_KEY, 0, 6, handle, name="DescribeGroups")


def _described(module: ModuleType, version: int, summary: GroupSummary, wants_ops: bool) -> Any:
    error = summary.error
    if isinstance(error, GroupIdNotFoundError) and version < FIRST_NOT_FOUND_VERSION:
        error = None  # older versions describe an unknown group as Dead, without an error
    members = tuple(
        make(
            module,
            "DescribedGroupMember",
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=m.metadata,
            member_assignment=m.assignment,
        )
        for m in summary.members
    )
    return make(
        module,
        "DescribedGroup",
        error_code=ErrorCode.none if error is None else error_code_for(error),
        error_message=None if error is None else str(error),
        group_id=summary.group_id,
        group_state=summary.state,
        protocol_type=summary.protocol_type,
        protocol_data=summary.protocol,
        members=members,
        authorized_operations=GROUP_OPERATIONS if wants_ops else AUTHORIZED_OPERATIONS_OMITTED,
    )
