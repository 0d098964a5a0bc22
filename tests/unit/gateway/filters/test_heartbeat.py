"""Heartbeat through the gateway: the group id is prefixed; READ on the group is required."""

from __future__ import annotations

import asyncio

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import heartbeat
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


@pytest.mark.parametrize("version", list(versions(heartbeat)))
def test_group_is_prefixed_and_response_passes(version: int) -> None:
    ctx = context(heartbeat, version)
    req = request(
        heartbeat, version, "HeartbeatRequest", group_id="g", generation_id=3, member_id="m"
    )
    outcome = forwarded(asyncio.run(run(heartbeat, ctx, req)))
    assert outcome.request.group_id == "acme_g"
    answer = response(heartbeat, version, "HeartbeatResponse", error_code=ErrorCode.none)
    assert outcome.on_response(answer) == answer


def test_denied_group_is_answered_locally() -> None:
    ctx = context(heartbeat, 4, access=FakeAccess(denied={("READ", "GROUP", "g")}))
    req = request(heartbeat, 4, "HeartbeatRequest", group_id="g", generation_id=3, member_id="m")
    answer = replied(asyncio.run(run(heartbeat, ctx, req)))
    assert answer.error_code == ErrorCode.group_authorization_failed
