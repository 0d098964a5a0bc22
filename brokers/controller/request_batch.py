"""A `Decision`'s orders as wire requests, one per destination broker and API (Kafka's
`ControllerBrokerRequestBatch`), pure.

Owns: batching `LeaderAndIsrOrder`s / `StopReplicaOrder`s / `UpdateMetadataOrder`s by broker
into LeaderAndIsr / StopReplica / UpdateMetadata requests stamped with the controller's id and
epoch and the DESTINATION broker's epoch (so a request meant for a broker's earlier registration
is recognisably stale there). `requests_for` returns them in the order Kafka sends them:
LeaderAndIsr, then UpdateMetadata, then StopReplica. A partition of a topic being deleted is
described with leader -2 (Kafka's `LeaderDuringDelete`) so brokers drop it from their caches.
Reads the context; not thread-safe (context).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from brokers.controller import requests as rq
from brokers.controller.context import ControllerContext
from brokers.controller.orders import Decision, LeaderAndIsrOrder, StopReplicaOrder
from brokers.controller.state import NO_LEADER, TopicPartition

LEADER_DURING_DELETE = -2


def leader_and_isr(
    context: ControllerContext, controller_id: int, broker: int, orders: list[LeaderAndIsrOrder]
) -> rq.LeaderAndIsrRequest:
    by_topic: dict[str, list[rq.LeaderAndIsrPartitionState]] = defaultdict(list)
    for order in orders:
        s, a = order.state, order.assignment
        by_topic[order.tp.topic].append(
            rq.LeaderAndIsrPartitionState(
                partition_index=order.tp.partition,
                controller_epoch=s.controller_epoch,
                leader=s.leader,
                leader_epoch=s.leader_epoch,
                isr=s.isr,
                partition_epoch=s.zk_version,
                replicas=a.replicas,
                adding_replicas=a.adding,
                removing_replicas=a.removing,
                is_new=order.is_new,
            )
        )
    leaders = sorted({o.state.leader for o in orders} & set(context.live_brokers))
    return rq.LeaderAndIsrRequest(
        controller_id=controller_id,
        controller_epoch=context.epoch,
        broker_epoch=context.broker_epoch(broker),
        topic_states=tuple(
            rq.LeaderAndIsrTopicState(
                topic_name=topic,
                topic_id=context.topic_ids.get(topic),
                partition_states=tuple(states),
            )
            for topic, states in sorted(by_topic.items())
        ),
        live_leaders=tuple(
            rq.LeaderAndIsrLiveLeader(
                broker_id=b,
                host_name=context.live_brokers[b].inter_broker.host,  # followers fetch there
                port=context.live_brokers[b].inter_broker.port,
            )
            for b in leaders
        ),
    )


def stop_replica(
    context: ControllerContext, controller_id: int, broker: int, orders: list[StopReplicaOrder]
) -> rq.StopReplicaRequest:
    by_topic: dict[str, list[rq.StopReplicaPartitionState]] = defaultdict(list)
    for order in orders:
        by_topic[order.tp.topic].append(
            rq.StopReplicaPartitionState(
                partition_index=order.tp.partition,
                leader_epoch=order.leader_epoch,
                delete_partition=order.delete,
            )
        )
    return rq.StopReplicaRequest(
        controller_id=controller_id,
        controller_epoch=context.epoch,
        broker_epoch=context.broker_epoch(broker),
        topic_states=tuple(
            rq.StopReplicaTopicState(topic_name=t, partition_states=tuple(p))
            for t, p in sorted(by_topic.items())
        ),
    )


def update_metadata(
    context: ControllerContext,
    controller_id: int,
    broker: int,
    partitions: Iterable[TopicPartition],
    topic_states: tuple[rq.UpdateMetadataTopicState, ...] | None = None,
) -> rq.UpdateMetadataRequest:
    """`topic_states`: `metadata_topic_states(context, partitions)` when already made (they do
    not depend on the destination, so one decision's requests to every broker share them)."""
    return rq.UpdateMetadataRequest(
        controller_id=controller_id,
        controller_epoch=context.epoch,
        broker_epoch=context.broker_epoch(broker),
        topic_states=(
            topic_states if topic_states is not None else metadata_topic_states(context, partitions)
        ),
        live_brokers=live_brokers(context),
    )


def metadata_topic_states(
    context: ControllerContext, partitions: Iterable[TopicPartition]
) -> tuple[rq.UpdateMetadataTopicState, ...]:
    by_topic: dict[str, list[rq.UpdateMetadataPartitionState]] = defaultdict(list)
    for tp in sorted(set(partitions)):
        state, replicas = context.leadership.get(tp), context.replicas(tp)
        deleting = tp.topic in context.topics_to_delete or tp not in context.assignments
        by_topic[tp.topic].append(
            rq.UpdateMetadataPartitionState(
                partition_index=tp.partition,
                controller_epoch=state.controller_epoch if state else context.epoch,
                leader=LEADER_DURING_DELETE if deleting else (state.leader if state else NO_LEADER),
                leader_epoch=state.leader_epoch if state else -1,
                isr=state.isr if state else (),
                zk_version=state.zk_version if state else -1,
                replicas=replicas,
                offline_replicas=tuple(r for r in replicas if r not in context.live_brokers),
            )
        )
    return tuple(
        rq.UpdateMetadataTopicState(
            topic_name=t, topic_id=context.topic_ids.get(t), partition_states=tuple(p)
        )
        for t, p in sorted(by_topic.items())
    )


def live_brokers(context: ControllerContext) -> tuple[rq.UpdateMetadataBroker, ...]:
    return tuple(
        rq.UpdateMetadataBroker(
            id=b,
            endpoints=tuple(
                rq.UpdateMetadataEndpoint(port=e.port, host=e.host, listener=e.listener)
                for e in reg.endpoints
            ),
            rack=reg.rack,
        )
        for b, reg in sorted(context.live_brokers.items())
    )


def requests_for(
    context: ControllerContext, controller_id: int, decision: Decision
) -> list[tuple[int, Any]]:
    """(broker, request) pairs to queue, in sending order; only live brokers are addressed."""
    out: list[tuple[int, Any]] = []
    lai: dict[int, list[LeaderAndIsrOrder]] = defaultdict(list)
    for order in decision.leader_and_isr:
        # Sent after the write: the context holds the state with its new znode version.
        written = context.leadership.get(order.tp, order.state)
        lai[order.broker_id].append(
            LeaderAndIsrOrder(order.broker_id, order.tp, written, order.assignment, order.is_new)
        )
    out += [(b, leader_and_isr(context, controller_id, b, o)) for b, o in sorted(lai.items())]
    # Every broker is told the same partitions (`metadata_to_all`): their states are made once
    # and shared by the requests (for a new 5,000-partition batch, ~0.5 MiB each fewer).
    made: dict[tuple[TopicPartition, ...], tuple[rq.UpdateMetadataTopicState, ...]] = {}
    for o in decision.update_metadata:
        key = tuple(o.partitions)
        if key not in made:
            made[key] = metadata_topic_states(context, key)
        out.append(
            (o.broker_id, update_metadata(context, controller_id, o.broker_id, key, made[key]))
        )
    stops: dict[int, list[StopReplicaOrder]] = defaultdict(list)
    for stop in decision.stop_replica:
        stops[stop.broker_id].append(stop)
    out += [(b, stop_replica(context, controller_id, b, o)) for b, o in sorted(stops.items())]
    return [(b, r) for b, r in out if b in context.live_brokers]
