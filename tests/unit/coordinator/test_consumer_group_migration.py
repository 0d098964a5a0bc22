"""The consumer protocol bytes of mixed groups (`brokers.coordinator.consumer_group_migration`):
subscriptions as the Java consumer sends them (v3: null user data, owned partitions, generation,
rack) and as librdkafka does (v0, empty user data), assignments written and read back."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from brokers.common.clock import ManualClock
from brokers.coordinator.config import GroupConfig
from brokers.coordinator.consumer_group import ConsumerGroup, ConsumerGroups, HeartbeatRequest
from brokers.coordinator.consumer_group_migration import (
    ClassicJoin,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    heartbeat,
    join,
    sync,
    upgrade,
)
from brokers.coordinator.consumer_protocol import encode_subscription
from brokers.coordinator.errors import (
    GroupIdNotFoundError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from brokers.coordinator.group import Group, GroupState
from brokers.coordinator.member import Member


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_a_java_v3_subscription_with_null_user_data() -> None:
    data = (
        struct.pack(">hi", 3, 1) + _string("t")
        + struct.pack(">i", -1)  # null user data
        + struct.pack(">i", 1) + _string("t") + struct.pack(">iii", 2, 0, 3)  # owned
        + struct.pack(">i", 7) + _string("rack-a")  # generation, rack
    )  # fmt: skip
    subscription = decode_subscription(data)
    assert subscription.topics == {"t"}
    assert subscription.owned == {"t": {0, 3}}


def test_a_v0_subscription_with_empty_user_data() -> None:
    data = struct.pack(">hi", 0, 2) + _string("a") + _string("b") + struct.pack(">i", 0)
    assert decode_subscription(data).topics == {"a", "b"}
    assert decode_subscription(data).owned == {}


@pytest.mark.parametrize("data", [b"", b"\x00", struct.pack(">hi", 0, 5) + _string("a")])
def test_short_bytes_do_not_parse(data: bytes) -> None:
    with pytest.raises(ValueError, match="consumer protocol"):
        decode_subscription(data)


def test_assignments_round_trip() -> None:
    partitions = {"a": {0, 2}, "b": {1}}
    assert decode_assignment(encode_assignment(partitions)) == partitions
    assert decode_assignment(b"") == {}


# ---- the state machine of mixed groups, driven directly ------------------------------------------
COUNTS = {"t": 4}


def _groups(policy: str = "bidirectional") -> ConsumerGroups:
    config = GroupConfig(
        consumer_session_timeout_ms=60_000,
        consumer_heartbeat_interval_ms=500,
        consumer_migration_policy=policy,
    )
    return ConsumerGroups(config, ManualClock())


def _classic_join(member_id: str, *, protocol_type: str = "consumer", metadata: bytes | None = None
                  ) -> ClassicJoin:  # fmt: skip
    subscription = encode_subscription(["t"]) if metadata is None else metadata
    return ClassicJoin(
        group_id="g", member_id=member_id, instance_id=None, protocol_type=protocol_type,
        protocols=(("range", subscription),), session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000, client_id="c", client_host="/127.0.0.1",
        require_known_member_id=True,
    )  # fmt: skip


def _consumer_group(groups: ConsumerGroups) -> ConsumerGroup:
    request = HeartbeatRequest("g", "modern", 0, ("t",), None, {})
    assert groups.heartbeat(request, COUNTS.get).error is None
    return groups.groups["g"]


def test_a_classic_member_joins_syncs_and_is_told_to_rejoin() -> None:
    groups = _groups()
    group = _consumer_group(groups)
    required = join(groups, group, _classic_join(""), COUNTS.get, COUNTS.keys)
    assert isinstance(required.error, MemberIdRequiredError)
    joined = join(groups, group, _classic_join(required.member_id), COUNTS.get, COUNTS.keys)
    assert joined.error is None and joined.leader_id == "" and joined.protocol_name == "range"
    synced = sync(groups, group, joined.member_id, joined.generation_id, "consumer", "range")
    assert synced.error is None
    mine = decode_assignment(synced.assignment)
    assert sum(len(p) for p in mine.values()) <= 2, "the consumer member still owns the rest"
    stale = sync(groups, group, joined.member_id, joined.generation_id - 1, None, None)
    assert isinstance(stale.error, IllegalGenerationError)
    wrong = sync(groups, group, joined.member_id, joined.generation_id, None, "roundrobin")
    assert isinstance(wrong.error, InconsistentGroupProtocolError)
    # the consumer member releases its partitions: the classic member may now take its share
    released = HeartbeatRequest("g", "modern", group.members["modern"].epoch, None, None, {})
    groups.heartbeat(released, COUNTS.get)
    error = heartbeat(groups, group, joined.member_id, joined.generation_id)
    assert isinstance(error, RebalanceInProgressError)
    assert isinstance(heartbeat(groups, group, "modern", 1), UnknownMemberIdError)


def _long_session(member_id: str) -> ClassicJoin:
    return dataclasses.replace(_classic_join(member_id), session_timeout_ms=30_000)


def test_a_classic_member_that_does_not_sync_or_rejoin_in_its_rebalance_timeout_is_fenced() -> None:
    groups = _groups()  # 60 s consumer sessions; classic: 30 s sessions, 10 s rebalance timeouts
    clock = groups.clock
    assert isinstance(clock, ManualClock)
    group = _consumer_group(groups)
    joined = join(groups, group, _long_session("k"), COUNTS.get, COUNTS.keys)
    assert joined.error is None
    clock.advance(9_999)
    assert groups.expire() == 0
    clock.advance(2)  # no SyncGroup within the rebalance timeout after its JoinGroup
    epoch = group.epoch
    assert groups.expire() == 1 and set(group.members) == {"modern"} and group.epoch == epoch + 1
    assert not group.classic and not group.sync_deadlines

    joined = join(groups, group, _long_session("k2"), COUNTS.get, COUNTS.keys)
    synced = sync(groups, group, "k2", joined.generation_id, None, None)
    assert synced.error is None and "k2" not in group.sync_deadlines
    for _ in range(2):  # 12 s > its rebalance timeout: synced, so only its session runs
        clock.advance(6_000)
        assert heartbeat(groups, group, "k2", joined.generation_id) is None
    assert groups.expire() == 0 and "k2" not in group.join_deadlines
    released = HeartbeatRequest("g", "modern", group.members["modern"].epoch, None, None, {})
    groups.heartbeat(released, COUNTS.get)  # frees partitions for k2: it must rejoin
    told = heartbeat(groups, group, "k2", joined.generation_id)
    assert isinstance(told, RebalanceInProgressError)
    clock.advance(5_000)
    assert isinstance(
        heartbeat(groups, group, "k2", joined.generation_id), RebalanceInProgressError
    )
    clock.advance(5_001)  # 10 s after the first REBALANCE_IN_PROGRESS (the timer is not reset)
    assert groups.expire() == 1 and "k2" not in group.members


def test_a_static_classic_member_is_replaced_without_the_release_check_as_kafka() -> None:
    groups = _groups()
    group = _consumer_group(groups)
    first = dataclasses.replace(_classic_join("k"), instance_id="ik")
    joined = join(groups, group, first, COUNTS.get, COUNTS.keys)
    assert joined.error is None and sync(groups, group, "k", joined.generation_id, None, None)
    epoch = group.epoch
    again = join(groups, group, dataclasses.replace(first, member_id="k2"), COUNTS.get, COUNTS.keys)
    assert again.error is None  # Kafka skips throwIfInstanceIdIsUnreleased for classic members
    assert set(group.members) == {"modern", "k2"} and set(group.classic) == {"k2"}
    assert group.epoch == epoch  # a replacement, not a new member
    modern = HeartbeatRequest("g", "m2", 0, ("t",), None, {}, instance_id="ik")
    assert groups.heartbeat(modern, COUNTS.get).error is None  # a classic member held it
    assert set(group.classic) == set() and "m2" in group.members


@pytest.mark.parametrize(
    ("protocol_type", "metadata"), [("connect", None), ("consumer", b"\x00"), ("consumer", b"")]
)
def test_a_classic_member_with_other_protocols_is_refused(
    protocol_type: str, metadata: bytes | None
) -> None:
    groups = _groups()
    group = _consumer_group(groups)
    request = _classic_join("m", protocol_type=protocol_type, metadata=metadata)
    result = join(groups, group, request, COUNTS.get, COUNTS.keys)
    assert isinstance(result.error, InconsistentGroupProtocolError)
    assert "m" not in group.members


def _classic_group(protocol_type: str = "consumer") -> Group:
    classic = Group("g", 0)
    member = Member("old", None, "c", "/h", 10_000, 10_000, protocol_type,
                    (("range", encode_subscription(["t"])),),
                    assignment=encode_assignment({"t": {0, 1, 2, 3}}))  # fmt: skip
    classic.add(member, None)
    classic.generation_id, classic.protocol_name = 5, "range"
    return classic


@pytest.mark.parametrize(("policy", "protocol_type"), [("disabled", "consumer"),
                         ("downgrade", "consumer"), ("bidirectional", "connect")])  # fmt: skip
def test_an_upgrade_is_refused_as_kafka(policy: str, protocol_type: str) -> None:
    result = upgrade(_groups(policy), _classic_group(protocol_type), COUNTS.get)
    assert isinstance(result, GroupIdNotFoundError)
    assert str(result) == "Group g is not a consumer group."


def test_an_upgrade_keeps_the_generation_and_assignments() -> None:
    groups, classic = _groups(), _classic_group()
    group = upgrade(groups, classic, COUNTS.get)
    assert isinstance(group, ConsumerGroup)
    assert (group.epoch, group.target_epoch) == (5, 5)
    assert group.members["old"].assigned == {"t": {0, 1, 2, 3}} and "old" in group.classic
    assert not classic.members and classic.state is GroupState.EMPTY
