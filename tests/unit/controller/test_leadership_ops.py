"""Leadership operations, pure parts: unclean election, reassignment replace/cancel/guards, the
election outcomes as domain errors and their codes, the three handlers against a fake
controller, and the CLI's replica-list parsing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.controller import ControllerMovedError, reassignment
from brokers.controller.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    NoReassignmentInProgressError,
    PreferredLeaderNotAvailableError,
    ReassignmentError,
    UnknownPartitionError,
    ZooKeeperUnavailableError,
)
from brokers.controller.orders import ElectionFailure
from brokers.controller.partition_state_machine import (
    Strategy,
    elect_leaders,
    preferred_election_candidates,
)
from brokers.controller.state import ReplicaAssignment
from brokers.controller.state import TopicPartition as TP
from brokers.handlers import alter_partition_reassignments, list_partition_reassignments
from brokers.handlers import elect_leaders as elect_handler
from brokers.handlers.errors import error_code_for
from brokers.wire.errors import ErrorCode
from pier.cluster_ops import UsageError, parse_replicas
from tests.unit.controller.test_state_machines import T0, T1, context, lai
from tests.unit.handlers.admin_harness import call, entity

pytestmark = pytest.mark.unit


# --- unclean election (ElectLeaders type 1) -----------------------------------------------------


def test_unclean_election_takes_a_live_out_of_sync_replica_only_when_the_leader_is_gone() -> None:
    ctx = context([2, 3], {T0: ([1, 2, 3], lai(1, [1])), T1: ([2, 3], lai(2, [2, 3]))})
    decision = elect_leaders(ctx, [T0, T1], Strategy.UNCLEAN)
    assert decision.changes[T0].leader == 2 and decision.changes[T0].isr == (2,)
    assert decision.changes[T0].leader_epoch == 4
    assert decision.failed == {T1: ElectionFailure.NOT_NEEDED}
    clean = elect_leaders(ctx, [T0], Strategy.OFFLINE)  # the topic does not allow it
    assert clean.failed == {T0: ElectionFailure.NO_ELIGIBLE_LEADER}


def test_unclean_election_without_any_live_replica_fails() -> None:
    ctx = context([3], {T0: ([1, 2], lai(1, [1, 2]))})
    assert elect_leaders(ctx, [T0], Strategy.UNCLEAN).failed == {
        T0: ElectionFailure.NO_ELIGIBLE_LEADER
    }


@pytest.mark.parametrize(
    ("failure", "error", "code"),
    [
        (ElectionFailure.NOT_NEEDED, ElectionNotNeededError, ErrorCode.election_not_needed),
        (
            ElectionFailure.PREFERRED_NOT_AVAILABLE,
            PreferredLeaderNotAvailableError,
            ErrorCode.preferred_leader_not_available,
        ),
        (
            ElectionFailure.NO_ELIGIBLE_LEADER,
            EligibleLeadersNotAvailableError,
            ErrorCode.eligible_leaders_not_available,
        ),
        (
            ElectionFailure.UNKNOWN_PARTITION,
            UnknownPartitionError,
            ErrorCode.unknown_topic_or_partition,
        ),
    ],
)
def test_election_failures_are_domain_errors_with_kafka_codes(
    failure: ElectionFailure, error: type[Exception], code: ErrorCode
) -> None:
    exc = failure.as_error(T0)
    assert isinstance(exc, error) and "t-0" in str(exc)
    assert error_code_for(exc) == code


def test_reassignment_errors_map_to_their_codes() -> None:
    assert error_code_for(ReassignmentError("x")) == ErrorCode.invalid_replica_assignment
    assert error_code_for(NoReassignmentInProgressError("x")) == (
        ErrorCode.no_reassignment_in_progress
    )
    assert error_code_for(ControllerMovedError("x")) == ErrorCode.not_controller


def test_auto_rebalance_skips_shutting_down_and_out_of_sync_preferred_replicas() -> None:
    ctx = context(
        [1, 2, 3],
        {
            T0: ([1, 2], lai(2, [1, 2])),
            T1: ([3, 2], lai(2, [2])),
            TP("t", 2): ([2, 1], lai(2, [2])),
        },
    )
    assert preferred_election_candidates(ctx, 10) == [T0]
    ctx.shutting_down.add(1)
    assert preferred_election_candidates(ctx, 10) == [], "broker 1 is stopping"


# --- reassignment ---------------------------------------------------------------------------------


def moving_context() -> Any:
    """t-0 on [1, 2], moving to [2, 3] (3 adding, 1 removing), leader 1, ISR [1, 2]."""
    ctx = context([1, 2, 3, 4], {T0: ([1, 2], lai(1, [1, 2]))})
    moving, started = reassignment.start(ctx, T0, [2, 3])
    ctx.assignments[T0] = moving
    ctx.apply(started.changes)
    return ctx


def test_cancel_reverts_and_drops_the_added_replica() -> None:
    ctx = moving_context()
    ctx.leadership[T0] = lai(1, [1, 2, 3], epoch=4)  # 3 caught up meanwhile
    reverted, decision = reassignment.cancel(ctx, T0)
    assert reverted == ReplicaAssignment((2, 1)) and not reverted.is_reassigning
    assert decision.changes[T0].isr == (1, 2) and decision.changes[T0].leader == 1
    assert [(s.broker_id, s.delete) for s in decision.stop_replica] == [(3, True)]
    assert {o.broker_id for o in decision.leader_and_isr} == {1, 2}


def test_cancel_without_a_reassignment_is_refused() -> None:
    ctx = context([1, 2], {T0: ([1, 2], lai(1, [1, 2]))})
    with pytest.raises(NoReassignmentInProgressError):
        reassignment.cancel(ctx, T0)


def test_a_new_target_replaces_the_one_in_flight() -> None:
    ctx = moving_context()
    replaced, decision = reassignment.start(ctx, T0, [2, 4])
    assert replaced == ReplicaAssignment((2, 4, 1), adding=(4,), removing=(1,))
    assert [s.broker_id for s in decision.stop_replica] == [3], "3 is in neither set now"
    assert {(o.broker_id, o.is_new) for o in decision.leader_and_isr} == {
        (2, False),
        (4, True),
        (1, False),
    }


def test_a_leader_that_is_no_longer_needed_hands_over() -> None:
    ctx = moving_context()
    ctx.leadership[T0] = lai(3, [3, 2], epoch=4)  # the adding replica leads after failures
    _, decision = reassignment.cancel(ctx, T0)
    assert decision.changes[T0].leader == 2 and decision.changes[T0].isr == (2,)


def test_dropping_the_leader_without_a_live_in_sync_successor_is_refused() -> None:
    ctx = moving_context()
    ctx.leadership[T0] = lai(3, [3, 2], epoch=4)  # the adding replica leads
    ctx.shutting_down.add(2)  # the only other in-sync replica cannot lead
    with pytest.raises(ReassignmentError, match="take over as leader"):
        reassignment.cancel(ctx, T0)  # would drop 3, the leader


def test_targets_are_checked_like_kafka() -> None:
    ctx = context([1, 2, 3], {T0: ([1, 2], lai(1, [1, 2]))})
    with pytest.raises(ReassignmentError, match="not alive"):
        reassignment.start(ctx, T0, [1, 9])
    with pytest.raises(ReassignmentError, match="Invalid broker id"):
        reassignment.start(ctx, T0, [1, -1])
    with pytest.raises(ReassignmentError, match="replication factor"):
        reassignment.start(ctx, T0, [1, 2, 3], allow_rf_change=False)
    moving, _ = reassignment.start(ctx, T0, [2, 3], allow_rf_change=False)
    assert moving.adding == (3,)
    ctx.live_brokers.pop(2)
    shrunk, _ = reassignment.start(ctx, T0, [1, 2])  # a dead ORIGINAL replica is fine
    assert shrunk == ReplicaAssignment((1, 2))


def test_reassigning_lists_only_moving_partitions() -> None:
    ctx = moving_context()
    ctx.assignments[T1] = ReplicaAssignment((1,))
    ctx.leadership[T1] = lai(1, [1])
    assert reassignment.reassigning(ctx) == [T0]


@settings(max_examples=60, deadline=None)
@given(
    original=st.lists(st.integers(1, 5), min_size=1, max_size=3, unique=True),
    target=st.lists(st.integers(1, 5), min_size=1, max_size=3, unique=True),
)
def test_start_then_complete_ends_on_the_target(original: list[int], target: list[int]) -> None:
    ctx = context([1, 2, 3, 4, 5], {T0: (original, lai(original[0], original))})
    moving, started = reassignment.start(ctx, T0, target)
    ctx.assignments[T0] = moving
    ctx.apply(started.changes)
    assert moving.target_replicas == tuple(target)
    assert moving.original_replicas == tuple(b for b in moving.replicas if b not in moving.adding)
    if moving.is_reassigning:
        ctx.leadership[T0] = lai(original[0], sorted({*original, *target}), epoch=9)
        final, done = reassignment.complete(ctx, T0)
        assert final == ReplicaAssignment(tuple(target))
        assert done.changes[T0].leader in target and set(done.changes[T0].isr) <= set(target)
        assert {s.broker_id for s in done.stop_replica} == set(original) - set(target)


# --- handlers against a fake controller -----------------------------------------------------------


class FakeController:
    def __init__(self, *, active: bool = True, failure: Exception | None = None) -> None:
        self.active = active
        self.failure = failure
        self.calls: list[Any] = []

    def _check(self) -> None:
        if not self.active:
            raise ControllerMovedError("not the controller")
        if self.failure is not None:
            raise self.failure

    async def elect_leaders(
        self, partitions: Sequence[tuple[str, int]] | None, *, unclean: bool = False
    ) -> Mapping[TP, Exception | None]:
        self._check()
        self.calls.append(("elect", partitions, unclean))
        return {TP("t", 0): None, TP("t", 1): ElectionNotNeededError("t-1")}

    async def alter_partition_reassignments(
        self,
        targets: Mapping[tuple[str, int], Sequence[int] | None],
        *,
        allow_replication_factor_change: bool = True,
    ) -> Mapping[TP, Exception | None]:
        self._check()
        self.calls.append(("alter", dict(targets), allow_replication_factor_change))
        return {
            TP(*tp): None if t else NoReassignmentInProgressError("x") for tp, t in targets.items()
        }

    async def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None = None
    ) -> Mapping[TP, ReplicaAssignment]:
        self._check()
        return {T0: ReplicaAssignment((2, 3, 1), (3,), (1,))}


def election_request(version: int, election_type: int = 0) -> Any:
    parts = (entity(43, version, "TopicPartitions", topic="t", partitions=(0, 1)),)
    return entity(
        43, version, "ElectLeadersRequest", election_type=election_type, topic_partitions=parts
    )


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_answers_per_partition(version: int) -> None:
    controller = FakeController()
    response = call(elect_handler.route(controller), version, election_request(version, 1))
    (topic,) = response.replica_election_results
    codes = {p.partition_id: p.error_code for p in topic.partition_result}
    assert codes == {0: ErrorCode.none, 1: ErrorCode.election_not_needed}
    assert controller.calls == [("elect", [("t", 0), ("t", 1)], version >= 1)]


def test_elect_leaders_on_a_non_controller_is_not_controller() -> None:
    route = elect_handler.route(FakeController(active=False))
    top = call(route, 2, election_request(2))
    assert top.error_code == ErrorCode.not_controller and top.replica_election_results == ()
    v0 = call(route, 0, election_request(0))  # no top-level code in v0: every partition says so
    codes = [p.error_code for t in v0.replica_election_results for p in t.partition_result]
    assert codes == [ErrorCode.not_controller, ErrorCode.not_controller]


def test_elect_leaders_refuses_an_unknown_election_type() -> None:
    response = call(elect_handler.route(FakeController()), 2, election_request(2, 7))
    codes = [p.error_code for t in response.replica_election_results for p in t.partition_result]
    assert codes == [ErrorCode.invalid_request, ErrorCode.invalid_request]


@pytest.mark.parametrize("version", [0, 1])
def test_alter_reassignments_starts_and_cancels(version: int) -> None:
    controller = FakeController()
    parts = (
        entity(45, version, "ReassignablePartition", partition_index=0, replicas=(2, 3)),
        entity(45, version, "ReassignablePartition", partition_index=1, replicas=None),
    )
    request = entity(
        45,
        version,
        "AlterPartitionReassignmentsRequest",
        topics=(entity(45, version, "ReassignableTopic", name="t", partitions=parts),),
        allow_replication_factor_change=False,
    )
    response = call(alter_partition_reassignments.route(controller), version, request)
    codes = {p.partition_index: p.error_code for t in response.responses for p in t.partitions}
    assert codes == {0: ErrorCode.none, 1: ErrorCode.no_reassignment_in_progress}
    assert controller.calls == [("alter", {("t", 0): (2, 3), ("t", 1): None}, version == 0)]
    refused = call(alter_partition_reassignments.route(FakeController(active=False)), 0, request)
    assert refused.error_code == ErrorCode.not_controller


def test_list_reassignments_reports_adding_and_removing() -> None:
    request = entity(46, 0, "ListPartitionReassignmentsRequest", topics=None)
    response = call(list_partition_reassignments.route(FakeController()), 0, request)
    ((topic,),) = [response.topics]
    (p,) = topic.partitions
    assert (topic.name, p.replicas, p.adding_replicas, p.removing_replicas) == (
        "t",
        (2, 3, 1),
        (3,),
        (1,),
    )
    refused = call(list_partition_reassignments.route(FakeController(active=False)), 0, request)
    assert refused.error_code == ErrorCode.not_controller


def test_other_controller_failures_are_an_error_code_not_a_closed_connection() -> None:
    broken = FakeController(failure=ZooKeeperUnavailableError("session lost"))
    top = call(elect_handler.route(broken), 2, election_request(2))
    assert top.error_code == ErrorCode.unknown_server_error
    listed = call(
        list_partition_reassignments.route(broken),
        0,
        entity(46, 0, "ListPartitionReassignmentsRequest", topics=None),
    )
    assert listed.error_code == ErrorCode.unknown_server_error


# --- the CLI's replica list -----------------------------------------------------------------------


def test_replica_lists_parse_or_are_refused() -> None:
    assert parse_replicas("1, 2,3") == [1, 2, 3]
    for bad in ("", "1,", "a", "1,1", "-1"):
        with pytest.raises(UsageError):
            parse_replicas(bad)
