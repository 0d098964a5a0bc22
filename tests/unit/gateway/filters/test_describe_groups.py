"""DescribeGroups through the gateway: groups prefixed, answers stripped, foreign groups dropped,
consumer members' metadata and assignment stripped, client host blanked, error messages scrubbed,
DESCRIBE per group (refusals merged in order), authorized operations from the tenant's ACLs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import describe_groups
from gateway.kafka.filters.consumer_protocol import (
    Assignment,
    Subscription,
    build_assignment,
    build_subscription,
    parse_assignment,
    parse_subscription,
)
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
M = describe_groups
SUB = build_subscription(Subscription(0, ("acme_a", "bolt_b")))
ASSIGN = build_assignment(Assignment(0, (("acme_a", (0,)), ("__consumer_offsets", (1,)))))


def _describe(version: int, *groups: str, ops: bool = False) -> Any:
    return request(
        M, version, "DescribeGroupsRequest", groups=groups, include_authorized_operations=ops
    )


def _group(version: int, group_id: str, protocol_type: str = "consumer") -> Any:
    member = response(
        M,
        version,
        "DescribedGroupMember",
        member_id="m",
        group_instance_id=None,
        client_id="app",
        client_host="/10.0.0.9",
        member_metadata=SUB,
        member_assignment=ASSIGN,
    )
    return response(
        M,
        version,
        "DescribedGroup",
        error_code=ErrorCode.none,
        error_message=f"about {group_id}",
        group_id=group_id,
        group_state="Stable",
        protocol_type=protocol_type,
        protocol_data="range",
        members=(member,),
        authorized_operations=12345,
    )


def _answer(version: int, *groups: Any) -> Any:
    return response(M, version, "DescribeGroupsResponse", groups=groups)


@pytest.mark.parametrize("version", list(versions(M)))
def test_groups_prefixed_stripped_foreign_dropped(version: int) -> None:
    outcome = forwarded(asyncio.run(run(M, context(M, version), _describe(version, "g", "h"))))
    assert outcome.request.groups == ("acme_g", "acme_h")
    answer = _answer(
        version, _group(version, "acme_h"), _group(version, "bolt_g"), _group(version, "acme_g")
    )
    client = outcome.on_response(answer)
    assert [g.group_id for g in client.groups] == ["g", "h"]
    member = client.groups[0].members[0]
    assert member.client_host == ""
    assert parse_subscription(member.member_metadata).topics == ("a",)
    assert parse_assignment(member.member_assignment).assigned_partitions == (("a", (0,)),)
    if version >= 6:
        assert client.groups[0].error_message == "about g"
    if version >= 3:
        assert client.groups[0].authorized_operations == -(2**31)


def test_other_protocol_types_keep_their_bytes() -> None:
    outcome = forwarded(asyncio.run(run(M, context(M, 6), _describe(6, "g"))))
    client = outcome.on_response(_answer(6, _group(6, "acme_g", "connect")))
    assert client.groups[0].members[0].member_metadata == SUB


def test_message_naming_another_tenant_is_dropped() -> None:
    outcome = forwarded(asyncio.run(run(M, context(M, 6), _describe(6, "g"))))
    group = _group(6, "acme_g")
    import dataclasses

    group = dataclasses.replace(group, error_message="clash with bolt_g")
    assert outcome.on_response(_answer(6, group)).groups[0].error_message is None


@pytest.mark.parametrize("version", [0, 6])
def test_refused_groups_merged_in_request_order(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("DESCRIBE", "GROUP", "g")}))
    outcome = forwarded(asyncio.run(run(M, ctx, _describe(version, "g", "h"))))
    assert outcome.request.groups == ("acme_h",)
    client = outcome.on_response(_answer(version, _group(version, "acme_h")))
    assert [(g.group_id, g.error_code) for g in client.groups] == [
        ("g", ErrorCode.group_authorization_failed),
        ("h", ErrorCode.none),
    ]
    all_refused = replied(asyncio.run(run(M, ctx, _describe(version, "g"))))
    assert all_refused.groups[0].error_code == ErrorCode.group_authorization_failed


def test_authorized_operations_from_the_tenants_acls() -> None:
    ctx = context(M, 5, access=FakeAccess(denied={("DELETE", "GROUP", "g")}))
    outcome = forwarded(asyncio.run(run(M, ctx, _describe(5, "g", ops=True))))
    client = outcome.on_response(_answer(5, _group(5, "acme_g")))
    assert client.groups[0].authorized_operations == (1 << 3) | (1 << 8) | (1 << 10) | (1 << 11)
