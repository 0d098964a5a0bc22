"""Elections skip registered brokers the controller cannot reach (issue 13): a broker killed with
-9 keeps its registration until its session expires, and electing it then takes the partition
offline. Broker 3 below is registered but refuses connections."""

from __future__ import annotations

import pytest

from brokers.controller import reassignment
from brokers.controller.context import ControllerContext
from brokers.controller.orders import ElectionFailure
from brokers.controller.partition_state_machine import (
    Strategy,
    elect_leaders,
    initialize_partitions,
    preferred_election_candidates,
)
from brokers.controller.replica_state_machine import broker_failure, controlled_shutdown
from brokers.controller.state import LeaderAndIsr, ReplicaAssignment
from brokers.controller.state import TopicPartition as TP
from tests.unit.controller.test_state_machines import context, lai

pytestmark = pytest.mark.unit
T0 = TP("t", 0)
DEAD = 3


def with_dead_broker(states: dict[TP, tuple[list[int], LeaderAndIsr]]) -> ControllerContext:
    ctx = context([1, 2, 3], states)
    ctx.unreachable.add(DEAD)
    return ctx


def test_an_unreachable_broker_is_registered_but_not_a_leader_candidate() -> None:
    ctx = with_dead_broker({})
    assert set(ctx.live_brokers) == {1, 2, 3}
    assert ctx.leader_candidates() == {1, 2}
    assert not ctx.is_live(DEAD)
    ctx.shutting_down.add(2)
    assert ctx.leader_candidates() == {1}


def test_controlled_shutdown_moves_leadership_past_the_unreachable_broker() -> None:
    ctx = with_dead_broker({T0: ([2, 3, 1], lai(2, [2, 3, 1]))})
    ctx.shutting_down.add(2)
    decision, remaining = controlled_shutdown(ctx, 2)
    assert decision.changes[T0].leader == 1
    assert remaining == []


def test_controlled_shutdown_keeps_a_leader_only_the_unreachable_broker_could_replace() -> None:
    ctx = with_dead_broker({T0: ([2, 3], lai(2, [2, 3]))})
    ctx.shutting_down.add(2)
    decision, remaining = controlled_shutdown(ctx, 2)
    assert T0 not in decision.changes or decision.changes[T0].leader == 2
    assert remaining == [T0]


def test_offline_and_failure_elections_skip_the_unreachable_broker() -> None:
    ctx = with_dead_broker({T0: ([2, 3, 1], lai(2, [2, 3, 1]))})
    del ctx.live_brokers[2]  # broker 2's session expired
    decision = broker_failure(ctx, 2)
    assert decision.changes[T0].leader == 1
    ctx = with_dead_broker({T0: ([3, 2], lai(2, [3]))})
    del ctx.live_brokers[2]
    decision = elect_leaders(ctx, [T0], Strategy.OFFLINE)
    assert decision.failed == {T0: ElectionFailure.NO_ELIGIBLE_LEADER}


def test_new_partitions_and_preferred_elections_skip_the_unreachable_broker() -> None:
    ctx = with_dead_broker({})
    ctx.assignments[T0] = ReplicaAssignment((3, 1, 2))
    decision = initialize_partitions(ctx, [T0])
    assert decision.changes[T0].leader == 1 and decision.changes[T0].isr == (1, 2)
    ctx = with_dead_broker({T0: ([3, 1, 2], lai(1, [1, 2, 3]))})
    decision = elect_leaders(ctx, [T0], Strategy.PREFERRED)
    assert decision.failed == {T0: ElectionFailure.PREFERRED_NOT_AVAILABLE}
    assert preferred_election_candidates(ctx, 0) == []


def test_a_completed_reassignment_never_hands_leadership_to_the_unreachable_broker() -> None:
    ctx = with_dead_broker({T0: ([3, 1, 2], lai(2, [2, 3, 1]))})
    ctx.assignments[T0] = ReplicaAssignment((3, 1, 2), (), (2,))  # moving from 2 to [3, 1]
    final, decision = reassignment.complete(ctx, T0)
    assert final.replicas == (3, 1)
    assert decision.changes[T0].leader == 1
