"""The gateway's consumer-protocol codec: round trips (hypothesis), kio's encoding as the oracle
for every known version, higher versions keeping their tail, renames both ways, malformed bytes."""

from __future__ import annotations

import contextlib
import struct
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokers.wire.entities import make
from brokers.wire.messages import encode_entity
from gateway.kafka.filters.consumer_protocol import (
    Assignment,
    MalformedConsumerProtocol,
    Subscription,
    build_assignment,
    build_subscription,
    parse_assignment,
    parse_subscription,
    rename_assignment,
    rename_subscription,
)

pytestmark = pytest.mark.unit

names = st.text(alphabet="abcXYZ019.-_", min_size=1, max_size=12)
partitions = st.lists(st.integers(0, 2**31 - 1), max_size=4).map(tuple)
topic_partitions = st.lists(st.tuples(names, partitions), max_size=4).map(tuple)
user_data = st.none() | st.binary(max_size=16)


@st.composite
def subscriptions(draw: st.DrawFn, max_version: int = 3) -> Subscription:
    version = draw(st.integers(0, max_version))
    return Subscription(
        version=version,
        topics=tuple(draw(st.lists(names, max_size=5))),
        user_data=draw(user_data),
        owned_partitions=draw(topic_partitions) if version >= 1 else (),
        generation_id=draw(st.integers(-(2**31), 2**31 - 1)) if version >= 2 else -1,
        rack_id=draw(st.none() | names) if version >= 3 else None,
    )


@st.composite
def assignments(draw: st.DrawFn) -> Assignment:
    return Assignment(draw(st.integers(0, 3)), draw(topic_partitions), draw(user_data))


def _kio_subscription(sub: Subscription) -> bytes:
    from kio.schema.consumer_protocol_subscription import v0, v1, v2, v3

    module = (v0, v1, v2, v3)[sub.version].data
    owned = tuple(
        make(module, "TopicPartition", topic=t, partitions=p) for t, p in sub.owned_partitions
    )
    entity = make(
        module,
        "ConsumerProtocolSubscription",
        topics=sub.topics,
        user_data=sub.user_data,
        owned_partitions=owned,
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    return struct.pack(">h", sub.version) + encode_entity(entity)


def _kio_assignment(assignment: Assignment) -> bytes:
    from kio.schema.consumer_protocol_assignment import v0, v1, v2, v3

    module = (v0, v1, v2, v3)[assignment.version].data
    assigned = tuple(
        make(module, "TopicPartition", topic=t, partitions=p)
        for t, p in assignment.assigned_partitions
    )
    entity = make(
        module,
        "ConsumerProtocolAssignment",
        assigned_partitions=assigned,
        user_data=assignment.user_data,
    )
    return struct.pack(">h", assignment.version) + encode_entity(entity)


@given(subscriptions())
def test_subscription_round_trip_matches_kio(sub: Subscription) -> None:
    data = build_subscription(sub)
    assert data == _kio_subscription(sub)
    assert parse_subscription(data) == sub


@given(assignments())
def test_assignment_round_trip_matches_kio(assignment: Assignment) -> None:
    data = build_assignment(assignment)
    assert data == _kio_assignment(assignment)
    assert parse_assignment(data) == assignment


@given(subscriptions(), st.integers(4, 100), st.binary(max_size=16))
def test_higher_subscription_version_keeps_its_tail(
    sub: Subscription, version: int, tail: bytes
) -> None:
    newer = replace(sub, version=version, tail=tail)
    data = build_subscription(newer)
    assert parse_subscription(data) == newer
    renamed = rename_subscription(data, lambda t: "acme_" + t)
    assert renamed.endswith(tail)
    assert rename_subscription(renamed, lambda t: t.removeprefix("acme_")) == data


@given(assignments(), st.integers(4, 100), st.binary(max_size=16))
def test_higher_assignment_version_keeps_its_tail(
    assignment: Assignment, version: int, tail: bytes
) -> None:
    newer = replace(assignment, version=version, tail=tail)
    data = build_assignment(newer)
    assert parse_assignment(data) == newer
    assert rename_assignment(data, str.upper).endswith(tail)


@given(subscriptions())
def test_subscription_rename_both_ways(sub: Subscription) -> None:
    data = build_subscription(sub)
    fleet = rename_subscription(data, lambda t: "acme_" + t)
    parsed = parse_subscription(fleet)
    assert all(t.startswith("acme_") for t in parsed.topics)
    assert all(t.startswith("acme_") for t, _ in parsed.owned_partitions)
    assert rename_subscription(fleet, lambda t: t.removeprefix("acme_")) == data


@given(assignments())
def test_assignment_rename_drops_what_rename_refuses(assignment: Assignment) -> None:
    data = build_assignment(assignment)
    kept = parse_assignment(rename_assignment(data, lambda t: t if "a" in t else None))
    assert kept.assigned_partitions == tuple(
        p for p in assignment.assigned_partitions if "a" in p[0]
    )
    assert kept.user_data == assignment.user_data


@given(st.binary(max_size=64))
def test_arbitrary_bytes_are_rebuilt_exactly_or_refused(data: bytes) -> None:
    """Either bytes parse and rebuild to themselves, or they raise MalformedConsumerProtocol."""
    with contextlib.suppress(MalformedConsumerProtocol):
        assert build_subscription(parse_subscription(data)) == data
    with contextlib.suppress(MalformedConsumerProtocol):
        assert build_assignment(parse_assignment(data)) == data


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff",  # negative version
        b"\x00\x00\x00\x00\x00\x01\x00\x05ab",  # truncated topic name
        b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe\xff\xff\xff\xff",  # not UTF-8
        b"\x00\x00\xff\xff\xff\xfe\xff\xff\xff\xff",  # negative array length
        b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xffEXTRA",  # trailing bytes on a known version
        b"\x00\x04\x00\x00\x00\x01",  # a newer version that is truncated
    ],
)
def test_malformed_subscriptions_are_refused(data: bytes) -> None:
    with pytest.raises(MalformedConsumerProtocol):
        parse_subscription(data)
    with pytest.raises(MalformedConsumerProtocol):
        rename_subscription(data, str.upper)


def test_malformed_assignment_is_refused() -> None:
    with pytest.raises(MalformedConsumerProtocol):
        rename_assignment(b"\x00\x01\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x09", str.upper)
