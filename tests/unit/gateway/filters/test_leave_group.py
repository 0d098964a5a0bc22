"""LeaveGroup through the gateway: the group id is prefixed; READ on the group is required."""

from __future__ import annotations

import asyncio

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import leave_group
from tests.unit.gateway.filters.harness import (
    FakeAccess,
    context,
    forwarded,
    replied,
    request,
    response,
    run,
    versions,
)

pytestmark = pytest.mark.unit


def _leave(version: int, group: str = "g") -> object:
    member = (
        request(
            leave_group,
            version,
            "MemberIdentity",
            member_id="m",
            group_instance_id=None,
            reason=None,
        )
        if version >= 3
        else None
    )
    return request(
        leave_group, version, "LeaveGroupRequest", group_id=group, member_id="m", members=(member,)
    )


@pytest.mark.parametrize("version", list(versions(leave_group)))
def test_group_is_prefixed_and_answer_passes(version: int) -> None:
    outcome = forwarded(
        asyncio.run(run(leave_group, context(leave_group, version), _leave(version)))
    )
    assert outcome.request.group_id == "acme_g"
    answer = response(
        leave_group, version, "LeaveGroupResponse", error_code=ErrorCode.none, members=()
    )
    assert outcome.on_response(answer) == answer


@pytest.mark.parametrize("version", [0, 5])
def test_denied_group_is_answered_locally(version: int) -> None:
    ctx = context(leave_group, version, access=FakeAccess(denied={("READ", "GROUP", "g")}))
    answer = replied(asyncio.run(run(leave_group, ctx, _leave(version))))
    assert answer.error_code == ErrorCode.group_authorization_failed


def test_empty_group_id_is_invalid() -> None:
    answer = replied(asyncio.run(run(leave_group, context(leave_group, 5), _leave(5, ""))))
    assert answer.error_code == ErrorCode.invalid_group_id
