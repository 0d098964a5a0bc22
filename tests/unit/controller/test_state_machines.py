"""Partition/replica state machines: election choices, ISR rules, orders, shutdown, reassignment."""

from __future__ import annotations

import uuid
from itertools import permutations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.controller import reassignment
from brokers.controller.context import ControllerContext
from brokers.controller.errors import ReassignmentError, UnknownPartitionError
from brokers.controller.orders import ElectionFailure
from brokers.controller.partition_state_machine import (
    Strategy,
    controlled_shutdown_leader,
    elect_leaders,
    initialize_partitions,
    offline_leader,
    preferred_election_candidates,
    preferred_leader,
)
from brokers.controller.replica_state_machine import (
    broker_failure,
    controlled_shutdown,
    replicas_deleted,
    replicas_offline,
)
from brokers.controller.state import NO_LEADER, BrokerEndpoint, LeaderAndIsr, ReplicaAssignment
from brokers.controller.state import TopicPartition as TP
from brokers.controller.zk_paths import BrokerRegistration

pytestmark = pytest.mark.unit
T0, T1 = TP("t", 0), TP("t", 1)


def context(live: list[int], states: dict[TP, tuple[list[int], LeaderAndIsr]]) -> ControllerContext:
    ctx = ControllerContext(epoch=5)
    for b in live:
        ctx.live_brokers[b] = BrokerRegistration(
            b, (BrokerEndpoint("PLAINTEXT", "h", 9000 + b),), None, 0, epoch=100 + b
        )
    ctx.add_topic("t", uuid.uuid4(), {})
    for tp, (replicas, state) in states.items():
        ctx.assignments[tp] = ReplicaAssignment(tuple(replicas))
        ctx.leadership[tp] = state
    return ctx


def lai(leader: int, isr: list[int], epoch: int = 3) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, tuple(isr), 4, zk_version=7)


# --- the election rules themselves ---------------------------------------------------------


def test_offline_election_takes_first_live_in_sync_replica_in_assignment_order() -> None:
    assert offline_leader([1, 2, 3], [3, 2], {2, 3}, False) == (2, (3, 2))
    assert offline_leader([1, 2, 3], [1, 3], {2, 3}, False) == (3, (3,))


def test_offline_election_refuses_out_of_sync_replicas_unless_unclean() -> None:
    assert offline_leader([1, 2, 3], [1], {2, 3}, False) is None
    assert offline_leader([1, 2, 3], [1], {2, 3}, True) == (2, (2,))
    assert offline_leader([1, 2], [1], set(), True) is None


@settings(max_examples=200, deadline=None)
@given(
    st.permutations([1, 2, 3, 4]),
    st.sets(st.sampled_from([1, 2, 3, 4]), min_size=1),
    st.sets(st.sampled_from([1, 2, 3, 4])),
    st.booleans(),
)
def test_offline_election_never_picks_outside_isr_when_clean(
    assignment: list[int], isr: set[int], live: set[int], unclean: bool
) -> None:
    chosen = offline_leader(assignment, sorted(isr), live, unclean)
    clean_candidates = [r for r in assignment if r in isr and r in live]
    if clean_candidates:
        assert chosen is not None
        assert chosen[0] == clean_candidates[0]
        assert set(chosen[1]) == isr & live
    elif unclean and live:
        assert chosen == (next(r for r in assignment if r in live), (chosen[0] if chosen else -1,))
    else:
        assert chosen is None


def test_preferred_and_controlled_shutdown_rules() -> None:
    assert preferred_leader([1, 2], [1, 2], {1, 2}) == 1
    assert preferred_leader([1, 2], [2], {1, 2}) is None
    assert preferred_leader([1, 2], [1, 2], {2}) is None
    assert controlled_shutdown_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == (2, (2, 3))
    assert controlled_shutdown_leader([1, 2], [1], {1, 2}, {1}) is None


# --- partition state machine decisions -----------------------------------------------------


def test_new_partitions_lead_with_first_live_replica_and_tell_every_replica() -> None:
    ctx = context([1, 2, 3], {})
    ctx.assignments[T0] = ReplicaAssignment((2, 1, 3))
    ctx.assignments[T1] = ReplicaAssignment((4, 3))
    decision = initialize_partitions(ctx, [T0, T1])
    assert decision.changes[T0] == LeaderAndIsr(2, 0, (2, 1, 3), 5)
    assert decision.changes[T1] == LeaderAndIsr(3, 0, (3,), 5)
    assert {(o.broker_id, o.tp) for o in decision.leader_and_isr} == {
        (2, T0),
        (1, T0),
        (3, T0),
        (3, T1),
    }
    assert all(o.is_new for o in decision.leader_and_isr)
    assert [u.broker_id for u in decision.update_metadata] == [1, 2, 3]


def test_offline_election_bumps_epochs_and_skips_partitions_with_live_leaders() -> None:
    ctx = context([2, 3], {T0: ([1, 2, 3], lai(1, [1, 2, 3])), T1: ([2, 3], lai(2, [2, 3]))})
    decision = elect_leaders(ctx, [T0, T1], Strategy.OFFLINE)
    assert decision.changes == {T0: LeaderAndIsr(2, 4, (2, 3), 5, zk_version=7)}
    assert decision.failed == {T1: ElectionFailure.NOT_NEEDED}
    assert sorted(o.broker_id for o in decision.leader_and_isr) == [2, 3]


def test_unclean_election_follows_the_topic_config() -> None:
    ctx = context([2], {T0: ([1, 2], lai(1, [1]))})
    assert elect_leaders(ctx, [T0], Strategy.OFFLINE).failed == {
        T0: ElectionFailure.NO_ELIGIBLE_LEADER
    }
    ctx.topic_configs["t"] = {"unclean.leader.election.enable": "true"}
    assert elect_leaders(ctx, [T0], Strategy.OFFLINE).changes[T0].isr == (2,)
    ctx.topic_configs["t"] = {"unclean.leader.election.enable": "false"}
    assert elect_leaders(ctx, [T0], Strategy.OFFLINE, unclean_default=True).failed


def test_preferred_election_outcomes() -> None:
    ctx = context([1, 2], {T0: ([1, 2], lai(2, [1, 2])), T1: ([1, 2], lai(1, [1, 2]))})
    decision = elect_leaders(ctx, [T0, T1, TP("t", 9)], Strategy.PREFERRED)
    assert decision.changes[T0].leader == 1 and decision.changes[T0].isr == (1, 2)
    assert decision.failed == {
        T1: ElectionFailure.NOT_NEEDED,
        TP("t", 9): ElectionFailure.UNKNOWN_PARTITION,
    }
    ctx.leadership[T0] = lai(2, [2])
    assert elect_leaders(ctx, [T0], Strategy.PREFERRED).failed == {
        T0: ElectionFailure.PREFERRED_NOT_AVAILABLE
    }


def test_auto_rebalance_candidates_respect_imbalance_threshold() -> None:
    states = {TP("t", p): ([1, 2], lai(2, [1, 2])) for p in range(10)}
    states[TP("t", 0)] = ([1, 2], lai(1, [1, 2]))
    ctx = context([1, 2], states)
    assert len(preferred_election_candidates(ctx, 10)) == 9
    assert preferred_election_candidates(ctx, 95) == []
    ctx.leadership[TP("t", 5)] = lai(2, [2])
    assert TP("t", 5) not in preferred_election_candidates(ctx, 10)


# --- replica state machine and broker events -----------------------------------------------


def test_offline_replica_leaves_isr_and_gets_stop_replica_when_running() -> None:
    ctx = context([1, 2, 3], {T0: ([1, 2, 3], lai(1, [1, 2, 3]))})
    decision = replicas_offline(ctx, [(T0, 3)])
    assert decision.changes[T0] == LeaderAndIsr(1, 4, (1, 2), 5, zk_version=7)
    assert [(s.broker_id, s.delete) for s in decision.stop_replica] == [(3, False)]
    assert sorted(o.broker_id for o in decision.leader_and_isr) == [1, 2]


def test_last_isr_member_is_kept_and_leader_becomes_none() -> None:
    ctx = context([2], {T0: ([1, 2], lai(1, [1]))})
    decision = replicas_offline(ctx, [(T0, 1)])
    assert decision.changes[T0].leader == NO_LEADER
    assert decision.changes[T0].isr == (1,)
    assert decision.leader_and_isr == []


def test_broker_failure_moves_leadership_and_shrinks_isr() -> None:
    ctx = context(
        [2, 3],
        {T0: ([1, 2, 3], lai(1, [1, 2, 3])), T1: ([2, 1, 3], lai(2, [2, 1, 3]))},
    )
    decision = broker_failure(ctx, 1)
    assert decision.changes[T0].leader == 2 and decision.changes[T0].isr == (2, 3)
    assert decision.changes[T1] == LeaderAndIsr(2, 4, (2, 3), 5, zk_version=7)
    assert not decision.stop_replica  # the dead broker cannot be told anything
    assert {o.broker_id for o in decision.leader_and_isr} == {2, 3}


def test_broker_failure_without_eligible_replica_leaves_partition_offline() -> None:
    ctx = context([2], {T0: ([1, 2], lai(1, [1]))})
    decision = broker_failure(ctx, 1)
    assert decision.changes[T0].leader == NO_LEADER
    assert decision.changes[T0].isr == (1,), "the last ISR member stays for a clean return"
    ctx.apply(decision.changes)
    assert ctx.offline_partitions() == [T0]


def test_controlled_shutdown_moves_leadership_first_and_reports_what_is_left() -> None:
    ctx = context(
        [1, 2, 3],
        {
            T0: ([1, 2, 3], lai(1, [1, 2, 3])),
            T1: ([2, 1], lai(2, [2, 1])),
            TP("t", 2): ([1], lai(1, [1])),
        },
    )
    ctx.shutting_down.add(1)
    decision, remaining = controlled_shutdown(ctx, 1)
    assert decision.changes[T0].leader == 2 and 1 not in decision.changes[T0].isr
    assert decision.changes[T1] == LeaderAndIsr(2, 4, (2,), 5, zk_version=7)
    assert remaining == [TP("t", 2)], "an RF-1 partition cannot move"
    assert (1, T1) in {(s.broker_id, s.tp) for s in decision.stop_replica}
    assert any(o.broker_id == 1 and o.tp == T0 for o in decision.leader_and_isr)


def test_controlled_shutdown_with_lagging_followers_keeps_leader() -> None:
    ctx = context([1, 2], {T0: ([1, 2], lai(1, [1]))})
    ctx.shutting_down.add(1)
    decision, remaining = controlled_shutdown(ctx, 1)
    assert decision.failed == {T0: ElectionFailure.NO_ELIGIBLE_LEADER}
    assert remaining == [T0]


def test_topic_deletion_stops_and_deletes_live_replicas() -> None:
    ctx = context([1, 2], {T0: ([1, 2, 3], lai(1, [1, 2]))})
    decision = replicas_deleted(ctx, "t")
    assert [(s.broker_id, s.delete) for s in decision.stop_replica] == [(1, True), (2, True)]


# --- reassignment ---------------------------------------------------------------------------


def test_reassignment_adds_then_drops_replicas() -> None:
    ctx = context([1, 2, 3, 4], {T0: ([1, 2, 3], lai(1, [1, 2, 3]))})
    moving, started = reassignment.start(ctx, T0, [4, 2, 3])
    assert moving == ReplicaAssignment((4, 2, 3, 1), adding=(4,), removing=(1,))
    assert moving.target_replicas == (4, 2, 3)
    assert started.changes[T0].leader_epoch == 4
    assert {(o.broker_id, o.is_new) for o in started.leader_and_isr} == {
        (1, False),
        (2, False),
        (3, False),
        (4, True),
    }
    ctx.assignments[T0] = moving
    ctx.apply(started.changes)
    assert not reassignment.caught_up(ctx, T0)
    with pytest.raises(ReassignmentError):
        reassignment.complete(ctx, T0)
    ctx.leadership[T0] = lai(1, [1, 2, 3, 4], epoch=4)
    final, done = reassignment.complete(ctx, T0)
    assert final == ReplicaAssignment((4, 2, 3))
    assert done.changes[T0].leader == 4, "the old leader is leaving: first in-sync target leads"
    assert done.changes[T0].isr == (2, 3, 4)
    assert {o.broker_id for o in done.leader_and_isr} == {2, 3, 4}
    assert [(s.broker_id, s.delete) for s in done.stop_replica] == [(1, True)]


@pytest.mark.parametrize("target", [[], [1, 1], [9]])
def test_invalid_reassignment_targets_are_refused(target: list[int]) -> None:
    ctx = context([1, 2], {T0: ([1, 2], lai(1, [1, 2]))})
    with pytest.raises(ReassignmentError):
        reassignment.start(ctx, T0, target)
    with pytest.raises(UnknownPartitionError):
        reassignment.start(ctx, TP("x", 0), [1])


@pytest.mark.parametrize("order", list(permutations([1, 2, 3])))
def test_reassignment_to_same_replicas_is_not_reassigning(order: tuple[int, ...]) -> None:
    ctx = context([1, 2, 3], {T0: ([1, 2, 3], lai(1, [1, 2, 3]))})
    moving, _ = reassignment.start(ctx, T0, list(order))
    assert not moving.is_reassigning
    assert moving.replicas == order
