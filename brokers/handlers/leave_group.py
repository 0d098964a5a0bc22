"""LeaveGroup (key 13, v0–5): members leave at once instead of waiting out their session.

v0–2 name one member and answer with its error; v3+ take a batch (KIP-345), where a static member
may be removed by group instance id alone. Classic members of a non-empty KIP-848 consumer
group leave it (`consumer_group_migration.leave`, written like a consumer heartbeat's leave).
Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.coordinator import consumer_group_migration as mixed
from brokers.coordinator.errors import GroupError, UnknownMemberIdError
from brokers.coordinator.results import LeavingMember, MemberLeave
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import GroupService
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 13
FIRST_BATCHED_VERSION = 3


def _code(error: Exception | None) -> ErrorCode:
    return ErrorCode.none if error is None else error_code_for(error)


def route(groups: GroupService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        batched = ctx.api_version >= FIRST_BATCHED_VERSION
        if batched:
            leaving = [
                LeavingMember(m.member_id, m.group_instance_id, getattr(m, "reason", None))
                for m in request.members
            ]
        else:
            leaving = [LeavingMember(request.member_id)]
        error, mixed_results = await _mixed(groups, request.group_id, leaving)
        if mixed_results is None:
            error, results = groups.coordinator.leave_group(request.group_id, leaving)
        else:
            results = mixed_results
        if not batched:
            single = error if error is not None else (results[0].error if results else None)
            return make(
                module, "LeaveGroupResponse", throttle_time=throttle(), error_code=_code(single)
            )
        members = tuple(
            make(
                module,
                "MemberResponse",
                member_id=r.member_id,
                group_instance_id=r.group_instance_id,
                error_code=_code(r.error),
            )
            for r in results
        )
        return make(
            module,
            "LeaveGroupResponse",
            throttle_time=throttle(),
            error_code=_code(error),
            members=members,
        )

    return Route(API_KEY, 0, 5, handle, name="LeaveGroup")


async def _mixed(
    groups: GroupService, group_id: str, leaving: list[LeavingMember]
) -> tuple[GroupError | None, list[MemberLeave] | None]:
    """Leaves from a KIP-848 consumer group's classic members; (None, None) for classic groups."""
    coordinator = groups.coordinator
    group = await mixed.route(coordinator, group_id)
    if group is None:
        return None, None
    found = mixed.leave(coordinator.consumer_groups, group, [m.member_id for m in leaving])
    results = [
        MemberLeave(m.member_id, m.group_instance_id, None if present else UnknownMemberIdError())
        for m, present in zip(leaving, found, strict=True)
    ]
    try:
        await coordinator.consumer_store.flush(group_id)
    except GroupError as exc:
        return exc, results
    return None, results
