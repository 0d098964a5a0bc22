"""SyncGroup through the gateway: the group and the leader's assignments' topics are prefixed,
the member's assignment stripped (foreign topics dropped), READ on the group required; before v5
bytes that do not parse as a consumer assignment pass unchanged."""

from __future__ import annotations

import asyncio

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import sync_group
from gateway.kafka.filters.consumer_protocol import Assignment, build_assignment, parse_assignment
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

MINE = build_assignment(Assignment(0, (("orders", (0, 1)),), b"ud"))


def _sync(
    version: int, assignment: bytes, protocol_type: str | None = "consumer", group: str = "g"
) -> object:
    entry = request(
        sync_group, version, "SyncGroupRequestAssignment", member_id="m-1", assignment=assignment
    )
    return request(
        sync_group,
        version,
        "SyncGroupRequest",
        group_id=group,
        generation_id=1,
        member_id="m-1",
        group_instance_id=None,
        protocol_type=protocol_type,
        protocol_name="range",
        assignments=(entry,),
    )


def _answer(version: int, assignment: bytes, protocol_type: str | None = "consumer") -> object:
    return response(
        sync_group,
        version,
        "SyncGroupResponse",
        error_code=ErrorCode.none,
        protocol_type=protocol_type,
        protocol_name="range",
        assignment=assignment,
    )


@pytest.mark.parametrize("version", list(versions(sync_group)))
def test_assignment_topics_are_prefixed_and_stripped(version: int) -> None:
    ctx = context(sync_group, version)
    outcome = forwarded(asyncio.run(run(sync_group, ctx, _sync(version, MINE))))
    assert outcome.request.group_id == "acme_g"
    sent = parse_assignment(outcome.request.assignments[0].assignment)
    assert sent.assigned_partitions == (("acme_orders", (0, 1)),)
    upstream = Assignment(
        0, (("acme_orders", (0,)), ("bolt_x", (1,)), ("__consumer_offsets", (2,)))
    )
    client = outcome.on_response(_answer(version, build_assignment(upstream)))
    assert parse_assignment(client.assignment).assigned_partitions == (("orders", (0,)),)


@pytest.mark.parametrize("version", [0, 4])
def test_before_v5_unparseable_assignments_pass(version: int) -> None:
    ctx = context(sync_group, version)
    outcome = forwarded(asyncio.run(run(sync_group, ctx, _sync(version, b"\x00\x01connect"))))
    assert outcome.request.assignments[0].assignment == b"\x00\x01connect"
    answer = _answer(version, b"\x00\x01connect")
    assert outcome.on_response(answer) == answer


def test_v5_other_protocol_type_passes_and_consumer_must_parse() -> None:
    ctx = context(sync_group, 5)
    outcome = forwarded(asyncio.run(run(sync_group, ctx, _sync(5, MINE, "connect"))))
    assert outcome.request.assignments[0].assignment == MINE
    refused = replied(asyncio.run(run(sync_group, ctx, _sync(5, b"\x00\x01bad"))))
    assert refused.error_code == ErrorCode.inconsistent_group_protocol
    assert refused.assignment == b""


def test_v5_unparseable_consumer_answer_is_blanked() -> None:
    ctx = context(sync_group, 5)
    outcome = forwarded(asyncio.run(run(sync_group, ctx, _sync(5, MINE))))
    assert outcome.on_response(_answer(5, b"\x00\x00bolt_x")).assignment == b""


@pytest.mark.parametrize("version", [0, 5])
def test_denied_group_is_answered_locally(version: int) -> None:
    ctx = context(sync_group, version, access=FakeAccess(denied={("READ", "GROUP", "g")}))
    answer = replied(asyncio.run(run(sync_group, ctx, _sync(version, MINE))))
    assert answer.error_code == ErrorCode.group_authorization_failed
    assert answer.assignment == b""


def test_empty_group_id_is_invalid() -> None:
    answer = replied(asyncio.run(run(sync_group, context(sync_group, 5), _sync(5, MINE, group=""))))
    assert answer.error_code == ErrorCode.invalid_group_id
