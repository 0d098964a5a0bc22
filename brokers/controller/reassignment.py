"""Partition reassignment steps (KIP-455, Kafka's `KafkaController.onPartitionReassignment`), pure.

Owns the two halves of moving a partition from its original replicas (ORS) to target replicas (TRS):
- `start`: the assignment becomes RS = TRS + (ORS - TRS) with adding = TRS - ORS and removing =
  ORS - TRS (written to `/brokers/topics/<t>`); the leader epoch bumps and every live replica of RS
  gets LeaderAndIsr, the added ones as new replicas, so they start fetching from the leader.
- `complete`, once every target replica is in the ISR (`caught_up`): RS = TRS; the leader stays if
  it is a live target replica, otherwise the first live in-sync target replica takes over; the
  removed replicas leave the ISR; StopReplica(delete) goes to them. Kafka does this in several
  epoch bumps (B3 then B4); one bump carrying the final leader, ISR and replicas is equivalent for
  followers, which only compare epochs.
Cancelling a reassignment (reverting to ORS) is the same `start` with TRS = ORS. Reads the context;
not thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokers.controller.context import ControllerContext
from brokers.controller.errors import ReassignmentError
from brokers.controller.orders import (
    Decision,
    ElectionFailure,
    LeaderAndIsrOrder,
    StopReplicaOrder,
    metadata_to_all,
)
from brokers.controller.state import ReplicaAssignment, TopicPartition


def _current(context: ControllerContext, tp: TopicPartition) -> ReplicaAssignment:
    assignment = context.assignments.get(tp)
    if assignment is None or tp not in context.leadership:
        raise ReassignmentError(f"unknown partition {tp}")
    return assignment


def start(
    context: ControllerContext, tp: TopicPartition, target: Sequence[int]
) -> tuple[ReplicaAssignment, Decision]:
    """The reassigning assignment to write, and the orders that start the new replicas."""
    current = _current(context, tp)
    if not target or len(set(target)) != len(target):
        raise ReassignmentError(f"target replicas {list(target)} must be non-empty and distinct")
    unknown = [b for b in target if b not in context.live_brokers]
    if unknown:
        raise ReassignmentError(f"target brokers {unknown} are not live")
    original = current.original_replicas
    adding = tuple(b for b in target if b not in original)
    # Kafka's `ReplicaAssignment.reassignTo`: target first, so the target's order (its preferred
    # leader) survives in `target_replicas`.
    union = (*target, *(b for b in original if b not in target))
    assignment = ReplicaAssignment(union, adding, tuple(b for b in original if b not in target))
    if not assignment.is_reassigning:
        assignment = ReplicaAssignment(tuple(target))
    state = context.leadership[tp]
    bumped = state.next_epoch(state.leader, state.isr, context.epoch)
    decision = Decision(changes={tp: bumped})
    decision.leader_and_isr = [
        LeaderAndIsrOrder(r, tp, bumped, assignment, is_new=r in adding)
        for r in union
        if r in context.live_brokers
    ]
    decision.update_metadata = metadata_to_all(set(context.live_brokers), {tp})
    return assignment, decision


def caught_up(context: ControllerContext, tp: TopicPartition) -> bool:
    """Every target replica is in the ISR: the reassignment may complete."""
    assignment = _current(context, tp)
    return set(assignment.target_replicas) <= set(context.leadership[tp].isr)


def complete(context: ControllerContext, tp: TopicPartition) -> tuple[ReplicaAssignment, Decision]:
    """The final assignment to write, the new leader/ISR and the orders dropping old replicas."""
    assignment = _current(context, tp)
    if not caught_up(context, tp):
        raise ReassignmentError(f"{tp}: target replicas are not all in the ISR yet")
    target = assignment.target_replicas
    final = ReplicaAssignment(target)
    state = context.leadership[tp]
    live = {b for b in context.live_brokers if b not in context.shutting_down}
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
