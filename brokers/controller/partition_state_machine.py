"""Partition leader election (Kafka's `PartitionStateMachine` and `PartitionLeaderElectionAlgorithms`), pure.

Owns: choosing leaders and ISRs for new partitions and for partitions moving to Online under one
of four strategies, and the LeaderAndIsr/UpdateMetadata orders that follow. "Live" below means
`ControllerContext.leader_candidates()`: registered, not shutting down, and not known to refuse
connections (a killed broker whose ZooKeeper session has not expired yet is never elected):
- OFFLINE: the first replica in assignment order that is live and in the ISR; when none and
  `unclean.leader.election.enable` is true for the topic, the first live replica with ISR = [it]
  (may lose committed data, so off by default). Only partitions whose leader is not live.
- UNCLEAN (ElectLeaders type 1, KIP-460): as OFFLINE with unclean election allowed whatever the
  topic says; partitions whose leader is live need no election.
- PREFERRED: the first assigned replica, if it is live and in the ISR; ISR unchanged.
- CONTROLLED_SHUTDOWN: the first assigned replica that is live, in the ISR and not shutting down;
  the shutting-down brokers leave the ISR.
- REASSIGN: the first target replica that is live and in the ISR; ISR unchanged.
Every change bumps the leader epoch and stamps the controller epoch. The functions read the
context and return a `Decision`; the caller writes the states to ZooKeeper (conditional on each
znode version), applies them to the context and sends the orders. Not thread-safe (context).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from brokers.controller.context import ControllerContext
from brokers.controller.orders import (
    Decision,
    ElectionFailure,
    LeaderAndIsrOrder,
    metadata_to_all,
)
from brokers.controller.state import INITIAL_LEADER_EPOCH, LeaderAndIsr, TopicPartition, shared

UNCLEAN_ELECTION = "unclean.leader.election.enable"


class Strategy(enum.Enum):
    OFFLINE = "offline"
    UNCLEAN = "unclean"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    REASSIGN = "reassign"


def offline_leader(
    assignment: Iterable[int], isr: Iterable[int], live: set[int], unclean: bool
) -> tuple[int, tuple[int, ...]] | None:
    """Leader and new ISR for an offline partition, or None when no replica may lead."""
    replicas, in_sync = list(assignment), list(isr)
    leader = next((r for r in replicas if r in live and r in in_sync), None)
    if leader is not None:
        return leader, tuple(r for r in in_sync if r in live)
    if unclean:
        leader = next((r for r in replicas if r in live), None)
        if leader is not None:
            return leader, (leader,)
    return None


def preferred_leader(assignment: Iterable[int], isr: Iterable[int], live: set[int]) -> int | None:
    preferred = next(iter(assignment), None)
    return preferred if preferred is not None and preferred in live and preferred in isr else None


def controlled_shutdown_leader(
    assignment: Iterable[int], isr: Iterable[int], live: set[int], shutting_down: set[int]
) -> tuple[int, tuple[int, ...]] | None:
    in_sync = list(isr)
    eligible = (r for r in assignment if r in live and r in in_sync and r not in shutting_down)
    leader = next(eligible, None)
    if leader is None:
        return None
    return leader, tuple(r for r in in_sync if r not in shutting_down)


def unclean_enabled(context: ControllerContext, topic: str, default: bool = False) -> bool:
    value = context.topic_configs.get(topic, {}).get(UNCLEAN_ELECTION)
    return default if value is None else value.strip().lower() == "true"


def initialize_partitions(
    context: ControllerContext, partitions: Iterable[TopicPartition]
) -> Decision:
    """NewPartition → OnlinePartition: the first live replica leads, the live replicas are the ISR."""
    decision = Decision()
    live = context.leader_candidates()
    for tp in sorted(partitions):
        assignment = context.assignments.get(tp)
        if assignment is None:
            decision.failed[tp] = ElectionFailure.UNKNOWN_PARTITION
            continue
        isr = shared(tuple(r for r in assignment.replicas if r in live))
        if not isr:
            decision.failed[tp] = ElectionFailure.NO_ELIGIBLE_LEADER
            continue
        state = LeaderAndIsr(isr[0], INITIAL_LEADER_EPOCH, isr, context.epoch)
        decision.changes[tp] = state
        decision.leader_and_isr += [
            LeaderAndIsrOrder(r, tp, state, assignment, is_new=True) for r in isr
        ]
    decision.update_metadata = metadata_to_all(set(context.live_brokers), set(decision.changes))
    return decision


def elect_leaders(
    context: ControllerContext,
    partitions: Iterable[TopicPartition],
    strategy: Strategy,
    *,
    unclean_default: bool = False,
) -> Decision:
    """OnlinePartition/OfflinePartition → OnlinePartition under `strategy` for each partition."""
    decision = Decision()
    for tp in sorted(set(partitions)):
        outcome = _elect_one(context, tp, strategy, unclean_default)
        if isinstance(outcome, ElectionFailure):
            decision.failed[tp] = outcome
            continue
        decision.changes[tp] = outcome
        assignment = context.assignments[tp]
        # Every replica that is up hears of it, the shutting-down one included: it must stop
        # acting as leader at once (Kafka reaches the same end through its StopReplica).
        recipients = [r for r in assignment.replicas if r in context.live_brokers]
        decision.leader_and_isr += [
            LeaderAndIsrOrder(r, tp, outcome, assignment) for r in recipients
        ]
    decision.update_metadata = metadata_to_all(set(context.live_brokers), set(decision.changes))
    return decision


def _elect_one(
    context: ControllerContext, tp: TopicPartition, strategy: Strategy, unclean_default: bool
) -> LeaderAndIsr | ElectionFailure:
    assignment, current = context.assignments.get(tp), context.leadership.get(tp)
    if assignment is None or current is None:
        return ElectionFailure.UNKNOWN_PARTITION
    live = context.leader_candidates()
    replicas, isr = assignment.replicas, current.isr
    if strategy in (Strategy.OFFLINE, Strategy.UNCLEAN):
        if current.leader in live:
            return ElectionFailure.NOT_NEEDED
        unclean = strategy is Strategy.UNCLEAN or unclean_enabled(
            context, tp.topic, unclean_default
        )
        chosen = offline_leader(replicas, isr, live, unclean)
    elif strategy is Strategy.PREFERRED:
        if replicas and current.leader == replicas[0]:
            return ElectionFailure.NOT_NEEDED
        preferred = preferred_leader(replicas, isr, live)
        if preferred is None:
            return ElectionFailure.PREFERRED_NOT_AVAILABLE
        chosen = (preferred, isr)
    elif strategy is Strategy.CONTROLLED_SHUTDOWN:
        chosen = controlled_shutdown_leader(replicas, isr, live, context.shutting_down)
    else:
        leader = next((r for r in assignment.target_replicas if r in live and r in isr), None)
        chosen = None if leader is None else (leader, isr)
    if chosen is None:
        return ElectionFailure.NO_ELIGIBLE_LEADER
    return current.next_epoch(chosen[0], chosen[1], context.epoch)


def preferred_election_candidates(
    context: ControllerContext, imbalance_percentage: int = 10
) -> list[TopicPartition]:
    """Partitions to move back to their preferred leader (`auto.leader.rebalance.enable`).

    As Kafka's `checkAndTriggerAutoLeaderRebalance`: for each broker, the share of the partitions
    it prefers that it does not lead; above `leader.imbalance.per.broker.percentage` all of them
    whose preferred replica is live and in the ISR are candidates. No reassigning partitions.
    """
    preferred_by_broker: dict[int, list[TopicPartition]] = {}
    for tp, assignment in sorted(context.assignments.items()):
        if (
            assignment.replicas
            and not assignment.is_reassigning
            and tp.topic not in context.topics_to_delete
        ):
            preferred_by_broker.setdefault(assignment.replicas[0], []).append(tp)
    candidates: list[TopicPartition] = []
    for broker, preferred in sorted(preferred_by_broker.items()):
        not_led = [
            tp for tp in preferred if (s := context.leadership.get(tp)) and s.leader != broker
        ]
        if not preferred or len(not_led) * 100 <= imbalance_percentage * len(preferred):
            continue
        live = context.is_live(broker)
        candidates += [tp for tp in not_led if live and broker in context.leadership[tp].isr]
    return candidates
