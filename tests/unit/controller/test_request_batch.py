"""Orders batched into control requests: one per broker and API, epochs stamped, Kafka's order."""

from __future__ import annotations

import uuid

import pytest

from brokers.controller import requests as rq
from brokers.controller.context import ControllerContext
from brokers.controller.orders import Decision
from brokers.controller.partition_state_machine import initialize_partitions
from brokers.controller.replica_state_machine import broker_failure, replicas_deleted
from brokers.controller.request_batch import LEADER_DURING_DELETE, requests_for
from brokers.controller.state import BrokerEndpoint, ReplicaAssignment, TopicPartition
from brokers.controller.zk_paths import BrokerRegistration

pytestmark = pytest.mark.unit
TOPIC_ID = uuid.UUID(int=3)


def context() -> ControllerContext:
    ctx = ControllerContext(epoch=4)
    for b in (1, 2, 3):
        endpoint = BrokerEndpoint("PLAINTEXT", f"h{b}", 9000 + b)
        ctx.live_brokers[b] = BrokerRegistration(b, (endpoint,), None, 0, epoch=100 + b)
    ctx.add_topic("t", TOPIC_ID, {0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 1))})
    return ctx


def written(ctx: ControllerContext, decision: Decision) -> None:
    """What the controller does after the ZooKeeper write: states get their znode versions."""
    ctx.apply(
        {
            tp: s.__class__(s.leader, s.leader_epoch, s.isr, s.controller_epoch, 5)
            for tp, s in decision.changes.items()
        }
    )


def test_new_partitions_become_one_leader_and_isr_then_one_update_metadata_per_broker() -> None:
    ctx = context()
    decision = initialize_partitions(ctx, ctx.assignments)
    written(ctx, decision)
    out = requests_for(ctx, 1, decision)
    kinds = [type(r).__name__ for _, r in out]
    assert kinds == ["LeaderAndIsrRequest"] * 3 + ["UpdateMetadataRequest"] * 3
    for broker, request in out:
        assert request.controller_epoch == 4 and request.controller_id == 1
        assert request.broker_epoch == 100 + broker
    lai = dict(out[:3])[2]
    assert lai.topic_states[0].topic_id == TOPIC_ID
    states = {p.partition_index: p for p in lai.topic_states[0].partition_states}
    assert states[1].leader == 2 and states[1].partition_epoch == 5 and states[1].is_new
    assert {leader.broker_id for leader in lai.live_leaders} == {1, 2}
    um = out[3][1]
    assert [b.id for b in um.live_brokers] == [1, 2, 3]
    assert {p.leader for p in um.topic_states[0].partition_states} == {1, 2}


def test_a_dead_broker_is_not_addressed_and_is_listed_offline() -> None:
    ctx = context()
    written(ctx, initialize_partitions(ctx, ctx.assignments))
    del ctx.live_brokers[2]
    decision = broker_failure(ctx, 2)
    written(ctx, decision)
    out = requests_for(ctx, 1, decision)
    assert {b for b, _ in out} == {1, 3}
    um = next(r for _, r in out if isinstance(r, rq.UpdateMetadataRequest))
    p1 = next(p for p in um.topic_states[0].partition_states if p.partition_index == 1)
    assert p1.leader == 3 and p1.offline_replicas == (2,) and 2 not in p1.isr


def test_deletion_sends_stop_replica_with_delete_and_leader_during_delete() -> None:
    ctx = context()
    written(ctx, initialize_partitions(ctx, ctx.assignments))
    ctx.topics_to_delete.add("t")
    out = requests_for(ctx, 1, replicas_deleted(ctx, "t"))
    assert [type(r).__name__ for _, r in out][-1] == "StopReplicaRequest"
    stops = [r for _, r in out if isinstance(r, rq.StopReplicaRequest)]
    assert len(stops) == 3
    assert all(p.delete_partition for s in stops for p in s.topic_states[0].partition_states)
    ums = [r for _, r in out if isinstance(r, rq.UpdateMetadataRequest)]
    leaders = {p.leader for r in ums for p in r.topic_states[0].partition_states}
    assert leaders == {LEADER_DURING_DELETE}
    assert TopicPartition("t", 0) in ctx.assignments  # the caller removes the topic afterwards


def test_the_brokers_update_metadata_requests_share_their_partition_states() -> None:
    """Issue 25: every broker is told the same partitions; their states are made once."""
    ctx = context()
    decision = initialize_partitions(ctx, ctx.assignments)
    written(ctx, decision)
    metadata = [
        r for _, r in requests_for(ctx, 1, decision) if isinstance(r, rq.UpdateMetadataRequest)
    ]
    assert len(metadata) == 3
    assert metadata[0].topic_states is metadata[1].topic_states is metadata[2].topic_states
    assert [r.broker_epoch for r in metadata] == [101, 102, 103]
