"""KIP-848 rebalance timeouts and static membership (`brokers.coordinator.consumer_group`) with an
injected clock: a member that does not revoke within its RebalanceTimeoutMs is fenced; a static
member leaving with epoch -2 keeps its assignment for the session timeout and a new member id with
its instance id takes it over without a rebalance (Kafka's replace rules)."""

from __future__ import annotations

import pytest

from brokers.common.clock import ManualClock
from brokers.coordinator.config import GroupConfig
from brokers.coordinator.consumer_group import (
    ConsumerGroups,
    HeartbeatRequest,
    HeartbeatResult,
    Partitions,
)
from brokers.coordinator.errors import (
    FencedInstanceIdError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)

TOPIC = "t"
COUNTS = {TOPIC: 4}
SESSION_MS = 3_000
REBALANCE_MS = 1_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def groups(clock: ManualClock) -> ConsumerGroups:
    config = GroupConfig(consumer_session_timeout_ms=SESSION_MS, consumer_heartbeat_interval_ms=500)
    return ConsumerGroups(config, clock)


def beat(
    groups: ConsumerGroups,
    member: str,
    epoch: int,
    owned: Partitions | None = None,
    *,
    instance: str | None = None,
    rebalance_ms: int = -1,
) -> HeartbeatResult:
    topics = (TOPIC,) if epoch == 0 else None
    request = HeartbeatRequest(
        "g", member, epoch, topics, None, owned, instance_id=instance,
        rebalance_timeout_ms=rebalance_ms,
    )  # fmt: skip
    return groups.heartbeat(request, COUNTS.get)


def test_a_member_that_does_not_revoke_in_its_rebalance_timeout_is_fenced(
    groups: ConsumerGroups, clock: ManualClock
) -> None:
    a = beat(groups, "a", 0, {}, rebalance_ms=REBALANCE_MS)
    assert a.assignment == {TOPIC: {0, 1, 2, 3}}
    b = beat(groups, "b", 0, {}, rebalance_ms=REBALANCE_MS)
    assert b.assignment == {}  # a still owns everything
    held = beat(groups, "a", a.member_epoch, {TOPIC: {0, 1, 2, 3}})  # told to give up 2, 3
    assert held.error is None and held.assignment == {TOPIC: {0, 1}}
    clock.advance(REBALANCE_MS // 2)
    beat(groups, "a", a.member_epoch, {TOPIC: {0, 1, 2, 3}})  # heartbeats, does not revoke
    beat(groups, "b", b.member_epoch, {})
    assert groups.expire() == 0
    epoch = groups.groups["g"].epoch
    clock.advance(REBALANCE_MS // 2)  # within the session timeout, past the rebalance timeout
    assert groups.expire() == 1
    group = groups.groups["g"]
    assert set(group.members) == {"b"} and group.epoch == epoch + 1
    fenced = beat(groups, "a", a.member_epoch, {TOPIC: {0, 1, 2, 3}})
    assert isinstance(fenced.error, UnknownMemberIdError)
    b = beat(groups, "b", b.member_epoch, {})
    assert b.error is None and b.assignment == {TOPIC: {0, 1, 2, 3}}  # a's partitions freed


def test_a_member_that_revokes_in_time_is_not_fenced(
    groups: ConsumerGroups, clock: ManualClock
) -> None:
    a = beat(groups, "a", 0, {}, rebalance_ms=REBALANCE_MS)
    beat(groups, "b", 0, {}, rebalance_ms=REBALANCE_MS)
    beat(groups, "a", a.member_epoch, {TOPIC: {0, 1, 2, 3}})
    clock.advance(REBALANCE_MS - 1)
    done = beat(groups, "a", a.member_epoch, {TOPIC: {0, 1}})
    assert done.member_epoch == groups.groups["g"].epoch
    clock.advance(REBALANCE_MS)
    assert groups.expire() == 0 and set(groups.groups["g"].members) == {"a", "b"}


# ---- static membership ----------------------------------------------------------------------
def two_static_members(groups: ConsumerGroups) -> tuple[HeartbeatResult, HeartbeatResult]:
    a = beat(groups, "a", 0, {}, instance="ia")
    b = beat(groups, "b", 0, {}, instance="ib")
    a = beat(groups, "a", a.member_epoch, {TOPIC: {0, 1, 2, 3}})
    a = beat(groups, "a", a.member_epoch, a.assignment)
    b = beat(groups, "b", b.member_epoch, {})
    assert groups.groups["g"].state == "Stable"
    return a, b


def test_a_static_member_leaving_with_minus_2_is_replaced_without_a_rebalance(
    groups: ConsumerGroups, clock: ManualClock
) -> None:
    a, b = two_static_members(groups)
    group = groups.groups["g"]
    epoch, kept = group.epoch, group.members["b"].assigned
    left = beat(groups, "b", -2, None, instance="ib")
    assert left.error is None and left.member_epoch == -2
    assert group.epoch == epoch and group.members["b"].assigned == kept  # kept for its return
    a = beat(groups, "a", a.member_epoch, a.assignment)
    assert a.assignment is None  # the others see nothing move

    clock.advance(SESSION_MS - 1)
    new = beat(groups, "b2", 0, {}, instance="ib")
    assert new.error is None and new.member_epoch == epoch and new.assignment == kept
    assert group.epoch == epoch and set(group.members) == {"a", "b2"}
    assert group.target["b2"] == kept and "b" not in group.target
    old = beat(groups, "b", b.member_epoch, b.assignment, instance="ib")
    assert isinstance(old.error, FencedInstanceIdError)  # the old member id is fenced
    assert isinstance(beat(groups, "b", b.member_epoch, b.assignment).error, UnknownMemberIdError)


def test_an_instance_id_still_in_use_is_unreleased(groups: ConsumerGroups) -> None:
    two_static_members(groups)
    taken = beat(groups, "b2", 0, {}, instance="ib")
    assert isinstance(taken.error, UnreleasedInstanceIdError)
    assert set(groups.groups["g"].members) == {"a", "b"}


def test_a_static_member_rejoining_under_its_own_id_without_leaving_is_unreleased(
    groups: ConsumerGroups,
) -> None:
    _, b = two_static_members(groups)  # as Kafka's throwIfInstanceIdIsUnreleased: epoch only
    group = groups.groups["g"]
    epoch, kept = group.epoch, group.members["b"].assigned
    again = beat(groups, "b", 0, {}, instance="ib")
    assert isinstance(again.error, UnreleasedInstanceIdError)
    assert group.members["b"].epoch == b.member_epoch and group.members["b"].assigned == kept
    assert group.epoch == epoch
    beat(groups, "b", -2, None, instance="ib")
    back = beat(groups, "b", 0, {}, instance="ib")  # after a -2 leave: its return
    assert back.error is None and back.assignment == kept and group.epoch == epoch


def test_a_static_member_that_does_not_come_back_is_removed_after_the_session(
    groups: ConsumerGroups, clock: ManualClock
) -> None:
    a, _ = two_static_members(groups)
    group = groups.groups["g"]
    epoch = group.epoch
    beat(groups, "b", -2, None, instance="ib")
    clock.advance(SESSION_MS // 2)
    beat(groups, "a", a.member_epoch, a.assignment)
    assert groups.expire() == 0
    clock.advance(SESSION_MS // 2)
    assert groups.expire() == 1 and set(group.members) == {"a"} and group.epoch == epoch + 1
    a = beat(groups, "a", a.member_epoch, a.assignment)
    assert a.assignment == {TOPIC: {0, 1, 2, 3}}  # b's partitions go to the rest
