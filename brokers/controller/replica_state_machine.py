"""Replica transitions and the broker-level events built on them (Kafka's `ReplicaStateMachine`,
`KafkaController.onBrokerFailure` and `doControlledShutdown`), pure.

Owns:
- `replicas_offline`: OnlineReplica → OfflineReplica. The replica leaves the ISR (unless it is the
  last member: Kafka keeps a one-replica ISR so that replica can come back as a clean leader); if
  it led, the partition gets NO_LEADER. The leader epoch bumps; remaining live replicas get
  LeaderAndIsr, a still-running replica gets StopReplica (not deleting its log).
- `broker_failure`: the dead broker's led partitions get an OFFLINE election, then its replicas go
  offline. The caller has already removed the broker from `live_brokers`.
- `controlled_shutdown`: leadership moves away first (CONTROLLED_SHUTDOWN election, only for
  partitions with other replicas); partitions it follows go offline for it. Returns, like Kafka,
  the partitions it still leads so the broker retries until that list is empty.
- `replicas_deleted`: StopReplica(delete) for a deleted topic's replicas.
Reads the context, returns a `Decision`; not thread-safe (context).
"""

from __future__ import annotations

from collections.abc import Iterable

from brokers.controller.context import ControllerContext
from brokers.controller.orders import Decision, LeaderAndIsrOrder, StopReplicaOrder, metadata_to_all
from brokers.controller.partition_state_machine import Strategy, elect_leaders
from brokers.controller.state import NO_LEADER, LeaderAndIsr, TopicPartition


def replicas_offline(
    context: ControllerContext,
    replicas: Iterable[tuple[TopicPartition, int]],
    base: dict[TopicPartition, LeaderAndIsr] | None = None,
) -> Decision:
    """Take each (partition, broker) replica offline; `base` holds states decided just before."""
    states = {**context.leadership, **(base or {})}
    decision = Decision()
    for tp, broker in sorted(set(replicas)):
        current = decision.changes.get(tp) or states.get(tp)
        if current is None:
            continue
        if broker in context.live_brokers:
            decision.stop_replica.append(StopReplicaOrder(broker, tp, False, current.leader_epoch))
        if broker not in current.isr and current.leader != broker:
            continue
        isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != broker)
        leader = NO_LEADER if current.leader == broker else current.leader
        decision.changes[tp] = current.next_epoch(leader, isr, context.epoch)
    for tp, state in decision.changes.items():
        if not state.has_leader:
            continue
        assignment = context.assignments[tp]
        offline = {b for t, b in replicas if t == tp}
        decision.leader_and_isr += [
            LeaderAndIsrOrder(r, tp, state, assignment)
            for r in assignment.replicas
            if r in context.live_brokers and r not in offline
        ]
    decision.update_metadata = metadata_to_all(set(context.live_brokers), set(decision.changes))
    return decision


def broker_failure(
    context: ControllerContext, broker_id: int, *, unclean_default: bool = False
) -> Decision:
    """Re-elect the leaders the dead broker held, then take its replicas offline."""
    led = [tp for tp, s in context.leadership.items() if s.leader == broker_id]
    election = elect_leaders(context, led, Strategy.OFFLINE, unclean_default=unclean_default)
    hosted = [(tp, broker_id) for tp in context.partitions_on_broker(broker_id)]
    return election.merge(replicas_offline(context, hosted, election.changes))


def controlled_shutdown(
    context: ControllerContext, broker_id: int
) -> tuple[Decision, list[TopicPartition]]:
    """Move leadership off `broker_id` (already in `context.shutting_down`) and shrink ISRs.

    Returns the decision and the partitions the broker will still lead once it is applied.
    """
    hosted = list(context.partitions_on_broker(broker_id))
    led = [
        tp
        for tp in hosted
        if (s := context.leadership.get(tp))
        and s.leader == broker_id
        and len(context.replicas(tp)) > 1
    ]
    election = elect_leaders(context, led, Strategy.CONTROLLED_SHUTDOWN)
    followed = [
        (tp, broker_id)
        for tp in hosted
        if (s := context.leadership.get(tp)) and s.leader != broker_id
    ]
    decision = election.merge(replicas_offline(context, followed, election.changes))
    states = {**context.leadership, **decision.changes}
    remaining = [tp for tp in hosted if (s := states.get(tp)) and s.leader == broker_id]
    return decision, remaining


def replicas_deleted(context: ControllerContext, topic: str) -> Decision:
    """StopReplica(delete=True) to every live replica of the topic's partitions (topic deletion)."""
    decision = Decision()
    for tp in context.partitions_of(topic):
        epoch = context.leadership[tp].leader_epoch if tp in context.leadership else -1
        decision.stop_replica += [
            StopReplicaOrder(r, tp, True, epoch)
            for r in context.replicas(tp)
            if r in context.live_brokers
        ]
    decision.update_metadata = metadata_to_all(
        set(context.live_brokers), set(context.partitions_of(topic))
    )
    return decision
