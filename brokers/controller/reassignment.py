"""Partition reassignment steps (KIP-455, Kafka's `KafkaController.onPartitionReassignment`), pure.

Owns the two halves of moving a partition from its original replicas (ORS) to target replicas (TRS):
- `start`: the assignment becomes RS = TRS + (ORS - TRS) with adding = TRS - ORS and removing =
  ORS - TRS (written to `/brokers/topics/<t>`); the leader epoch bumps and every live replica of RS
  gets LeaderAndIsr, the added ones as new replicas, so they start fetching from the leader. As
  Kafka's `validateReplicas`: the target must be non-empty, distinct, non-negative ids, and the
  replicas being added must be live. A new target replacing one in flight (or a cancellation)
  leaves replicas of the old RS that are in neither: they leave the ISR (and the leadership, to
  the first live in-sync replica of the new RS) and get StopReplica(delete), as Kafka's
  `updateCurrentReassignment` does.
- `complete`, once every target replica is in the ISR (`caught_up`): RS = TRS; the leader stays if
  it is a live target replica, otherwise the first live in-sync target replica takes over; the
  removed replicas leave the ISR; StopReplica(delete) goes to them. Kafka does this in several
  epoch bumps (B3 then B4); one bump carrying the final leader, ISR and replicas is equivalent for
  followers, which only compare epochs.
- `cancel` (null target replicas) is `start` with TRS = ORS; NoReassignmentInProgressError when the
  partition is not moving.
Reads the context; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokers.controller.context import ControllerContext
from brokers.controller.errors import (
    NoReassignmentInProgressError,
    ReassignmentError,
    UnknownPartitionError,
)
from brokers.controller.orders import (
    Decision,
    ElectionFailure,
    LeaderAndIsrOrder,
    StopReplicaOrder,
    metadata_to_all,
)
from brokers.controller.state import NO_LEADER, ReplicaAssignment, TopicPartition


def current_assignment(context: ControllerContext, tp: TopicPartition) -> ReplicaAssignment:
    assignment = context.assignments.get(tp)
    if assignment is None or tp not in context.leadership:
        raise UnknownPartitionError(f"unknown partition {tp}")
    return assignment


def check_target(
    context: ControllerContext,
    tp: TopicPartition,
    target: Sequence[int],
    allow_rf_change: bool = True,
) -> None:
    """Kafka's `validateReplicas`: ReassignmentError (INVALID_REPLICA_ASSIGNMENT) when invalid;
    `allow_rf_change=False` (KIP-860) also refuses a target of another size than the original."""
    current = current_assignment(context, tp)
    if not target:
        raise ReassignmentError("Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        raise ReassignmentError(f"Duplicate replica ids in partition reassignment: {list(target)}")
    if any(b < 0 for b in target):
        raise ReassignmentError(f"Invalid broker id in replica list: {list(target)}")
    adding = [b for b in target if b not in current.original_replicas]
    dead = [b for b in adding if b not in context.live_brokers]
    if dead:
        raise ReassignmentError(f"Replica assignment has brokers that are not alive: {dead}")
    if not allow_rf_change and len(target) != len(current.original_replicas):
        raise ReassignmentError(
            f"The replication factor is changed from {len(current.original_replicas)} "
            f"to {len(target)}, which is not allowed by this request"
        )


def start(
    context: ControllerContext,
    tp: TopicPartition,
    target: Sequence[int],
    allow_rf_change: bool = True,
) -> tuple[ReplicaAssignment, Decision]:
    """The reassigning assignment to write, and the orders that start the new replicas."""
    check_target(context, tp, target, allow_rf_change)
    current = current_assignment(context, tp)
    original = current.original_replicas
    adding = tuple(b for b in target if b not in original)
    # Kafka's `ReplicaAssignment.reassignTo`: target first, so the target's order (its preferred
    # leader) survives in `target_replicas`.
    union = (*target, *(b for b in original if b not in target))
    assignment = ReplicaAssignment(union, adding, tuple(b for b in original if b not in target))
    if not assignment.is_reassigning:
        assignment = ReplicaAssignment(tuple(target))
    unneeded = tuple(r for r in current.replicas if r not in assignment.replicas)
    state = context.leadership[tp]
    isr = tuple(r for r in state.isr if r not in unneeded)
    leader = state.leader
    if leader in unneeded:
        live = context.leader_candidates()
        leader = next((r for r in assignment.replicas if r in live and r in isr), NO_LEADER)
    if not isr:
        raise ReassignmentError(f"{tp}: no in-sync replica would remain")
    if leader == NO_LEADER and state.leader != NO_LEADER:
        # Dropping the leader with no live in-sync replica to take over would take it offline.
        raise ReassignmentError(f"{tp}: no live in-sync replica could take over as leader")
    bumped = state.next_epoch(leader, isr, context.epoch)
    decision = Decision(changes={tp: bumped})
    decision.leader_and_isr = [
        LeaderAndIsrOrder(r, tp, bumped, assignment, is_new=r in adding)
        for r in assignment.replicas
        if r in context.live_brokers
    ]
    decision.stop_replica = [
        StopReplicaOrder(r, tp, True, bumped.leader_epoch)
        for r in unneeded
        if r in context.live_brokers
    ]
    decision.update_metadata = metadata_to_all(set(context.live_brokers), {tp})
    return assignment, decision


def cancel(context: ControllerContext, tp: TopicPartition) -> tuple[ReplicaAssignment, Decision]:
    """Revert an in-flight reassignment to the original replicas."""
    current = current_assignment(context, tp)
    if not current.is_reassigning:
        raise NoReassignmentInProgressError(f"{tp} has no reassignment in progress")
    return start(context, tp, current.original_replicas)


def caught_up(context: ControllerContext, tp: TopicPartition) -> bool:
    """Every target replica is in the ISR: the reassignment may complete."""
    assignment = current_assignment(context, tp)
    return set(assignment.target_replicas) <= set(context.leadership[tp].isr)


def complete(context: ControllerContext, tp: TopicPartition) -> tuple[ReplicaAssignment, Decision]:
    """The final assignment to write, the new leader/ISR and the orders dropping old replicas."""
    assignment = current_assignment(context, tp)
    if not caught_up(context, tp):
        raise ReassignmentError(f"{tp}: target replicas are not all in the ISR yet")
    target = assignment.target_replicas
    final = ReplicaAssignment(target)
    state = context.leadership[tp]
    live = context.leader_candidates()
    leader = state.leader if state.leader in target and state.leader in live else None
    leader = (
        leader
        if leader is not None
        else next((r for r in target if r in live and r in state.isr), None)
    )
    if leader is None:
        return assignment, Decision(failed={tp: ElectionFailure.NO_ELIGIBLE_LEADER})
    isr = tuple(r for r in state.isr if r in target)
    new_state = state.next_epoch(leader, isr, context.epoch)
    decision = Decision(changes={tp: new_state})
    decision.leader_and_isr = [
        LeaderAndIsrOrder(r, tp, new_state, final) for r in target if r in context.live_brokers
    ]
    decision.stop_replica = [
        StopReplicaOrder(r, tp, True, new_state.leader_epoch)
        for r in assignment.removing
        if r in context.live_brokers
    ]
    decision.update_metadata = metadata_to_all(set(context.live_brokers), {tp})
    return final, decision


def reassigning(context: ControllerContext) -> list[TopicPartition]:
    """Partitions with a reassignment in flight (ListPartitionReassignments, failover resume)."""
    return sorted(
        tp for tp, a in context.assignments.items() if a.is_reassigning and tp in context.leadership
    )
