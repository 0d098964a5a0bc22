"""JoinGroup through the gateway: the group and the embedded subscription's topics are prefixed,
members' subscriptions stripped (foreign topics dropped), READ on the group required, malformed
consumer metadata refused, other protocol types untouched."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import join_group
from gateway.kafka.filters.consumer_protocol import (
    Subscription,
    build_subscription,
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

MINE = Subscription(1, ("orders", "audit"), b"ud", (("orders", (0, 1)),))
FLEET = Subscription(1, ("acme_orders", "acme_audit"), b"ud", (("acme_orders", (0, 1)),))


def _join(version: int, protocol_type: str, metadata: bytes, group: str = "g") -> object:
    module = join_group
    protocol = request(module, version, "JoinGroupRequestProtocol", name="range", metadata=metadata)
    return request(
        module,
        version,
        "JoinGroupRequest",
        group_id=group,
        session_timeout=timedelta(seconds=10),
        rebalance_timeout=timedelta(seconds=30),
        member_id="m-1",
        group_instance_id=None,
        protocol_type=protocol_type,
        protocols=(protocol,),
        reason=None,
    )


def _answer(version: int, metadata: bytes) -> object:
    member = response(
        join_group,
        version,
        "JoinGroupResponseMember",
        member_id="m-1",
        group_instance_id=None,
        metadata=metadata,
    )
    return response(
        join_group,
        version,
        "JoinGroupResponse",
        error_code=ErrorCode.none,
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader="m-1",
        skip_assignment=False,
        member_id="m-1",
        members=(member,),
    )


@pytest.mark.parametrize("version", list(versions(join_group)))
def test_group_and_subscription_topics_are_prefixed_and_stripped(version: int) -> None:
    ctx = context(join_group, version)
    outcome = forwarded(
        asyncio.run(run(join_group, ctx, _join(version, "consumer", build_subscription(MINE))))
    )
    assert outcome.request.group_id == "acme_g"
    assert parse_subscription(outcome.request.protocols[0].metadata) == FLEET
    upstream = Subscription(
        1,
        ("acme_orders", "bolt_secret", "__consumer_offsets"),
        b"ud",
        (("acme_orders", (0, 1)), ("bolt_secret", (2,))),
    )
    client = outcome.on_response(_answer(version, build_subscription(upstream)))
    assert parse_subscription(client.members[0].metadata) == Subscription(
        1, ("orders",), b"ud", (("orders", (0, 1)),)
    )


@pytest.mark.parametrize("version", [0, 9])
def test_other_protocol_types_pass_their_bytes(version: int) -> None:
    ctx = context(join_group, version)
    outcome = forwarded(asyncio.run(run(join_group, ctx, _join(version, "connect", b"\x01opaque"))))
    assert outcome.request.protocols[0].metadata == b"\x01opaque"
    answer = _answer(version, b"\x01opaque")
    assert outcome.on_response(answer) == answer


@pytest.mark.parametrize("version", [0, 6, 7, 9])
def test_malformed_consumer_metadata_is_refused(version: int) -> None:
    ctx = context(join_group, version)
    answer = replied(asyncio.run(run(join_group, ctx, _join(version, "consumer", b"\x00\x00\x00"))))
    assert answer.error_code == ErrorCode.inconsistent_group_protocol
    assert answer.members == ()


def test_unparseable_member_metadata_in_the_answer_is_blanked() -> None:
    ctx = context(join_group, 9)
    outcome = forwarded(asyncio.run(run(join_group, ctx, _join(9, "consumer", b""))))
    assert outcome.request.protocols[0].metadata == b""
    client = outcome.on_response(_answer(9, b"\x00\x00garbage bolt_x"))
    assert client.members[0].metadata == b""


@pytest.mark.parametrize("version", [0, 7, 9])
def test_denied_group_is_answered_locally(version: int) -> None:
    ctx = context(join_group, version, access=FakeAccess(denied={("READ", "GROUP", "g")}))
    answer = replied(asyncio.run(run(join_group, ctx, _join(version, "consumer", b""))))
    assert answer.error_code == ErrorCode.group_authorization_failed
    assert answer.generation_id == -1
    assert answer.protocol_name == (None if version >= 7 else "")


def test_empty_group_id_is_invalid() -> None:
    answer = replied(
        asyncio.run(run(join_group, context(join_group, 9), _join(9, "consumer", b"", "")))
    )
    assert answer.error_code == ErrorCode.invalid_group_id
