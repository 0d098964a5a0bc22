"""KIP-848's coordinator state machine (`brokers.coordinator.consumer_group`) and its assignors:
incremental reconciliation (a partition moves only after its owner stopped listing it), member
epochs and fencing, leave, session expiry and the offset commit check."""

from __future__ import annotations

import pytest

from brokers.common.clock import ManualClock
from brokers.coordinator.config import GroupConfig
from brokers.coordinator.consumer_assignors import assign
from brokers.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroups,
    HeartbeatRequest,
    HeartbeatResult,
    Partitions,
)
from brokers.coordinator.consumer_group_migration_state import ClassicMembership
from brokers.coordinator.errors import (
    FencedMemberEpochError,
    GroupConfigError,
    IllegalGenerationError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnsupportedAssignorError,
)

TOPIC = "t"
COUNTS = {TOPIC: 4}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def groups(clock: ManualClock) -> ConsumerGroups:
    config = GroupConfig(consumer_session_timeout_ms=3_000, consumer_heartbeat_interval_ms=500)
    return ConsumerGroups(config, clock)


def beat(
    groups: ConsumerGroups,
    member: str,
    epoch: int,
    owned: Partitions | None = None,
    *,
    topics: tuple[str, ...] | None = None,
    assignor: str | None = None,
) -> HeartbeatResult:
    request = HeartbeatRequest("g", member, epoch, topics, assignor, owned)
    return groups.heartbeat(request, COUNTS.get)


def join(groups: ConsumerGroups, member: str) -> HeartbeatResult:
    return beat(groups, member, 0, {}, topics=(TOPIC,))


def test_a_partition_moves_only_after_its_owner_revoked_it(groups: ConsumerGroups) -> None:
    a = join(groups, "a")
    assert a.error is None and a.assignment == {TOPIC: {0, 1, 2, 3}}
    b = join(groups, "b")
    assert b.error is None
    assert groups.groups["g"].epoch == b.member_epoch == 2, "one epoch bump per join, as Kafka"
    assert not b.assignment, "a still owns every partition: nothing for b yet"
    # a's heartbeat still lists everything: it is told to keep only its half, epoch unchanged
    a2 = beat(groups, "a", a.member_epoch, {TOPIC: {0, 1, 2, 3}})
    assert a2.member_epoch == a.member_epoch
    assert a2.assignment is not None and len(a2.assignment[TOPIC]) == 2
    kept = a2.assignment[TOPIC]
    b2 = beat(groups, "b", b.member_epoch, {})
    assert not b2.assignment, "a has not revoked yet"
    # a revokes: its next heartbeat lists only what it kept; then it moves to the new epoch
    a3 = beat(groups, "a", a.member_epoch, {TOPIC: set(kept)})
    assert a3.member_epoch == b.member_epoch > a.member_epoch
    b3 = beat(groups, "b", b.member_epoch, {})
    assert b3.assignment == {TOPIC: {0, 1, 2, 3} - kept}


def test_fencing_unknown_members_and_leave(groups: ConsumerGroups) -> None:
    a = join(groups, "a")
    stale = beat(groups, "a", a.member_epoch + 5, {})
    assert isinstance(stale.error, FencedMemberEpochError)
    assert isinstance(beat(groups, "nobody", 3, {}).error, UnknownMemberIdError)
    left = beat(groups, "a", -1)
    assert left.error is None and left.member_epoch == -1
    assert isinstance(beat(groups, "a", a.member_epoch, {}).error, UnknownMemberIdError)
    assert isinstance(
        beat(groups, "c", 0, {}, topics=(TOPIC,), assignor="sticky").error,
        UnsupportedAssignorError,
    )


def test_a_lost_response_is_sent_again(groups: ConsumerGroups) -> None:
    a = join(groups, "a")
    assert a.assignment == {TOPIC: {0, 1, 2, 3}}
    assert beat(groups, "a", a.member_epoch, None).assignment is None, "unchanged: not sent"
    again = beat(groups, "a", a.member_epoch, {})  # it never got the first answer
    assert again.assignment == {TOPIC: {0, 1, 2, 3}}


def test_v0_join_gets_a_server_chosen_member_id(groups: ConsumerGroups) -> None:
    joined = join(groups, "")
    assert joined.error is None and len(joined.member_id) == 32


def test_session_timeout_frees_a_dead_members_partitions(
    groups: ConsumerGroups, clock: ManualClock
) -> None:
    a, b = join(groups, "a"), join(groups, "b")
    a2 = beat(groups, "a", a.member_epoch, {TOPIC: {0, 1, 2, 3}})
    assert a2.assignment is not None
    a3 = beat(groups, "a", a.member_epoch, {TOPIC: set(a2.assignment[TOPIC])})
    assert len(beat(groups, "b", b.member_epoch, {}).assignment or {}) == 1
    clock.advance(2_000)
    beat(groups, "b", b.member_epoch, None)  # b keeps its session, a does not
    clock.advance(2_000)
    assert groups.expire() == 1
    b4 = beat(groups, "b", b.member_epoch, None)
    assert b4.assignment == {TOPIC: {0, 1, 2, 3}}
    assert b4.member_epoch > a3.member_epoch


def test_expiry_names_the_groups_that_lost_members_and_passes_empty_ones(
    groups: ConsumerGroups, clock: ManualClock
) -> None:
    """Every tick (100 ms) visits every consumer group this broker coordinates: the groups
    that lost members are named (their records written), a group without members is passed
    over (a tenant may keep thousands until their offsets expire)."""
    join(groups, "a")
    for i in range(1_000):
        groups.groups[f"empty-{i}"] = ConsumerGroup(f"empty-{i}")
    clock.advance(4_000)
    assert groups.expire_members() == {"g": ["a"]}
    assert groups.expire_members() == {}


def test_offset_commit_and_fetch_check_member_and_epoch(groups: ConsumerGroups) -> None:
    a = join(groups, "a")
    assert groups.validate_commit("g", "a", a.member_epoch) is None
    assert isinstance(groups.validate_commit("g", "a", a.member_epoch - 1), StaleMemberEpochError)
    assert isinstance(groups.validate_commit("g", "x", a.member_epoch), UnknownMemberIdError)
    assert isinstance(groups.validate_commit("g", "", -1), UnknownMemberIdError)
    assert groups.validate_fetch("g", "a", a.member_epoch) is None
    assert groups.validate_fetch("g", None, -1) is None, "an admin's read"
    assert groups.validate_fetch("other", "a", 7) is None, "not a consumer group"
    assert isinstance(groups.validate_fetch("g", "a", a.member_epoch + 1), StaleMemberEpochError)
    assert isinstance(groups.validate_fetch("g", "x", a.member_epoch), UnknownMemberIdError)


def test_a_classic_member_of_a_mixed_group_is_told_illegal_generation(
    groups: ConsumerGroups,
) -> None:
    """Kafka answers a classic-protocol member's wrong generation ILLEGAL_GENERATION, the code
    its client rejoins on; STALE_MEMBER_EPOCH is for consumer-protocol members."""
    a = join(groups, "a")
    groups.groups["g"].classic["a"] = ClassicMembership((("range", b""),), 45_000, 300_000)
    assert groups.validate_commit("g", "a", a.member_epoch) is None
    stale = a.member_epoch - 1
    assert isinstance(groups.validate_commit("g", "a", stale), IllegalGenerationError)
    assert isinstance(groups.validate_fetch("g", "a", stale), IllegalGenerationError)


def test_assignors() -> None:
    subscriptions = {"a": frozenset({"x", "y"}), "b": frozenset({"x", "y"})}
    ranged = assign("range", subscriptions, {"x": 3, "y": 2}, {})
    assert ranged == {"a": {"x": {0, 1}, "y": {0}}, "b": {"x": {2}, "y": {1}}}
    previous = {"a": {"x": {0, 1, 2}, "y": {0, 1}}}
    uniform = assign("uniform", subscriptions, {"x": 3, "y": 2}, previous)
    sizes = sorted(sum(len(p) for p in member.values()) for member in uniform.values())
    assert sizes == [2, 3]
    assert uniform["a"]["x"] == {0, 1, 2}, "the previous owner keeps what its quota allows"
    with pytest.raises(GroupConfigError):
        GroupConfig.from_properties({"group.consumer.assignors": "sticky"})
