"""Control APIs through the dispatcher: fencing, metadata cache, orders, controlled shutdown."""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import Any

import pytest

from brokers.controller import BrokerEpochMismatchError, ControllerMovedError
from brokers.controller import requests as rq
from brokers.controller.channel import frame_request, read_response
from brokers.handlers import controlled_shutdown, leader_and_isr, stop_replica, update_metadata
from brokers.handlers.control_fence import BrokerFence, StaleBrokerEpochError
from brokers.handlers.errors import error_code_for
from brokers.replication.errors import StaleControllerEpochError, UnknownTopicOrPartitionError
from brokers.replication.metadata_cache import MetadataCache, TopicMetadata
from brokers.replication.replica_manager import PartitionStateUpdate
from brokers.server.dispatcher import Dispatcher, Peer
from brokers.server.routes import RouteTable
from brokers.wire.errors import ErrorCode
from brokers.wire.primitives import MalformedRequestError

pytestmark = pytest.mark.unit
TOPIC_ID = uuid.UUID(int=42)
Results = dict[tuple[str, int], Exception | None]


class FakeReplicas:
    """Records the orders; partition 9 is refused, as the data path refuses what it cannot do."""

    def __init__(self) -> None:
        self.applied: list[tuple[int, list[PartitionStateUpdate], dict[int, tuple[str, int]]]] = []
        self.stopped: list[tuple[list[tuple[str, int]], bool]] = []

    def apply_leader_and_isr(
        self,
        controller_epoch: int,
        updates: list[PartitionStateUpdate],
        leaders: dict[int, tuple[str, int]],
    ) -> Results:
        self.applied.append((controller_epoch, updates, leaders))
        return {
            (u.topic, u.partition): UnknownTopicOrPartitionError("x") if u.partition == 9 else None
            for u in updates
        }

    def stop_replicas(self, partitions: list[tuple[str, int]], *, delete: bool) -> Results:
        self.stopped.append((partitions, delete))
        return dict.fromkeys(partitions)


class Node:
    def __init__(self) -> None:
        self.fence = BrokerFence()
        self.fence.on_registered(500)
        self.metadata = MetadataCache(cluster_id="c", controller_id=-1)
        self.replicas = FakeReplicas()
        table = RouteTable()
        table.add(leader_and_isr.route(self.fence, self.metadata, self.replicas))
        table.add(update_metadata.route(self.fence, self.metadata))
        table.add(stop_replica.route(self.fence, self.replicas))
        self.dispatcher = Dispatcher(table)

    def call(self, request: Any) -> Any:
        frame = memoryview(frame_request(request, 7, b"ctl"))[4:]
        reply = asyncio.run(self.dispatcher.dispatch(frame, Peer("127.0.0.1", "c1")))
        assert reply is not None and reply.correlation_id == 7
        assert isinstance(reply.body, bytes)
        raw = struct.pack(">i", 7) + reply.body
        return read_response(int(request.__api_key__), raw, 7)


def lai(controller_epoch: int, broker_epoch: int, partitions: tuple[int, ...] = (0,)) -> Any:
    states = tuple(
        rq.LeaderAndIsrPartitionState(
            partition_index=p,
            controller_epoch=controller_epoch,
            leader=1,
            leader_epoch=3,
            isr=(1, 2),
            partition_epoch=4,
            replicas=(1, 2, 3),
        )
        for p in partitions
    )
    return rq.LeaderAndIsrRequest(
        controller_id=1,
        controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
        topic_states=(
            rq.LeaderAndIsrTopicState(
                topic_name="orders", topic_id=TOPIC_ID, partition_states=states
            ),
        ),
        live_leaders=(rq.LeaderAndIsrLiveLeader(broker_id=1, host_name="h1", port=9001),),
    )


def um(
    controller_epoch: int,
    leader: int = 2,
    broker_epoch: int = 500,
    replicas: tuple[int, ...] = (1, 2, 3),
) -> Any:
    state = rq.UpdateMetadataPartitionState(
        partition_index=0,
        controller_epoch=controller_epoch,
        leader=leader,
        leader_epoch=6,
        isr=(2, 3),
        zk_version=8,
        replicas=replicas,
        offline_replicas=(1,),
    )
    brokers = tuple(
        rq.UpdateMetadataBroker(
            id=b,
            endpoints=(
                rq.UpdateMetadataEndpoint(port=9000 + b, host=f"h{b}", listener="PLAINTEXT"),
            ),
            rack="r1",
        )
        for b in (2, 3)
    )
    return rq.UpdateMetadataRequest(
        controller_id=3,
        controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
        topic_states=(
            rq.UpdateMetadataTopicState(
                topic_name="orders", topic_id=TOPIC_ID, partition_states=(state,)
            ),
        ),
        live_brokers=brokers,
    )


def test_leader_and_isr_reaches_the_replica_manager_with_per_partition_errors() -> None:
    node = Node()
    node.metadata.topics["orders"] = TopicMetadata("orders", TOPIC_ID, {}, {"cleanup.policy": "x"})
    response = node.call(lai(4, 500, (0, 9)))
    assert response.error_code == ErrorCode.none
    errors = {p.partition_index: p.error_code for p in response.topics[0].partition_errors}
    assert errors == {0: ErrorCode.none, 9: ErrorCode.unknown_topic_or_partition}
    epoch, updates, leaders = node.replicas.applied[0]
    assert epoch == 4 and leaders == {1: ("h1", 9001)}
    assert updates[0] == PartitionStateUpdate(
        "orders", 0, TOPIC_ID, 1, 3, [1, 2], [1, 2, 3], 4, {"cleanup.policy": "x"}
    )


def test_a_stale_controller_epoch_is_answered_and_ignored() -> None:
    node = Node()
    assert node.call(lai(5, 500)).error_code == ErrorCode.none
    response = node.call(lai(4, 500))
    assert response.error_code == error_code_for(StaleControllerEpochError())
    assert response.error_code == ErrorCode.stale_controller_epoch
    assert len(node.replicas.applied) == 1
    assert node.call(um(3)).error_code == ErrorCode.stale_controller_epoch
    assert node.metadata.topics == {}


def test_a_request_for_an_earlier_broker_epoch_is_ignored() -> None:
    node = Node()
    response = node.call(lai(4, 499))
    assert response.error_code == error_code_for(StaleBrokerEpochError())
    assert response.error_code != ErrorCode.none
    assert node.replicas.applied == []
    assert node.call(um(4, broker_epoch=400)).error_code != ErrorCode.none
    assert node.metadata.brokers == {}
    assert node.call(lai(4, -1)).error_code == ErrorCode.none  # unstamped: admitted (Kafka)


def test_update_metadata_refreshes_brokers_controller_and_leaders() -> None:
    node = Node()
    assert node.call(um(2)).error_code == ErrorCode.none
    assert sorted(node.metadata.brokers) == [2, 3]
    assert node.metadata.brokers[3].host == "h3" and node.metadata.brokers[3].rack == "r1"
    assert node.metadata.controller_id == 3
    partition = node.metadata.partition("orders", 0)
    assert partition is not None
    assert (partition.leader, partition.leader_epoch, partition.isr) == (2, 6, [2, 3])
    assert partition.offline_replicas == [1]
    node.call(um(2, leader=3))
    moved = node.metadata.partition("orders", 0)
    assert moved is not None and moved.leader == 3
    heard: list[list[tuple[str, int]]] = []
    node.metadata.on_partitions_deleted(lambda deleted: heard.append(list(deleted)))
    node.call(um(2, leader=update_metadata.LEADER_DURING_DELETE))
    assert "orders" not in node.metadata.topics
    assert heard == [[("orders", 0)]], "the deletion listeners hear of it (onPartitionsDeleted)"
    node.call(um(2, leader=update_metadata.LEADER_DURING_DELETE))  # again: nothing left to delete
    assert heard == [[("orders", 0)]]


def test_the_replica_load_follows_placements_not_leaders() -> None:
    """A topic's creation checks each broker's replica count (`MetadataCache.replica_load`):
    counted again after a partition comes, goes or moves, kept across a leader change."""
    node = Node()
    node.call(um(2))
    assert node.metadata.replica_load() == {1: 1, 2: 1, 3: 1}
    placed = node.metadata.partition_changes
    node.call(um(2, leader=3))
    assert node.metadata.partition_changes == placed, "a new leader moves no replica"
    node.call(um(2, replicas=(2, 3, 4)))
    assert node.metadata.replica_load() == {2: 1, 3: 1, 4: 1}
    node.call(um(2, leader=update_metadata.LEADER_DURING_DELETE))
    assert node.metadata.replica_load() == {}


def test_stop_replica_groups_partitions_by_their_delete_flag() -> None:
    node = Node()
    topic = rq.StopReplicaTopicState(
        topic_name="orders",
        partition_states=(
            rq.StopReplicaPartitionState(partition_index=0, leader_epoch=3, delete_partition=True),
            rq.StopReplicaPartitionState(partition_index=1, leader_epoch=3),
        ),
    )
    request = rq.StopReplicaRequest(
        controller_id=1, controller_epoch=2, broker_epoch=500, topic_states=(topic,)
    )
    response = node.call(request)
    assert response.error_code == ErrorCode.none
    assert sorted(node.replicas.stopped, key=lambda s: s[1]) == [
        ([("orders", 1)], False),
        ([("orders", 0)], True),
    ]
    assert [p.error_code for p in response.partition_errors] == [0, 0]
    stale = rq.StopReplicaRequest(
        controller_id=1, controller_epoch=1, broker_epoch=500, topic_states=(topic,)
    )
    assert node.call(stale).error_code == ErrorCode.stale_controller_epoch
    assert len(node.replicas.stopped) == 2


def test_malformed_control_bytes_are_refused_not_crashing() -> None:
    node = Node()
    frame = bytearray(frame_request(lai(1, 500), 7, b"ctl")[4:])
    with pytest.raises(MalformedRequestError):
        asyncio.run(node.dispatcher.dispatch(memoryview(bytes(frame[:-6])), Peer("h", "c")))
    assert node.replicas.applied == []


class FakeController:
    def __init__(self, outcome: list[tuple[str, int]] | Exception) -> None:
        self.outcome = outcome
        self.asked: list[tuple[int, int]] = []

    def request_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> list[tuple[str, int]]:
        self.asked.append((broker_id, broker_epoch))
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def shutdown_answer(controller: FakeController) -> Any:
    table = RouteTable()
    table.add(controlled_shutdown.route(controller))
    request = rq.ControlledShutdownRequest(broker_id=3, broker_epoch=77)
    frame = memoryview(frame_request(request, 9, b"b3"))[4:]
    reply = asyncio.run(Dispatcher(table).dispatch(frame, Peer("h", "c")))
    assert reply is not None and isinstance(reply.body, bytes)
    return read_response(rq.CONTROLLED_SHUTDOWN, struct.pack(">i", 9) + reply.body, 9)


def test_controlled_shutdown_answers_the_partitions_still_led() -> None:
    controller = FakeController([("orders", 1)])
    answer = shutdown_answer(controller)
    assert controller.asked == [(3, 77)]
    assert answer.error_code == ErrorCode.none
    assert [(p.topic_name, p.partition_index) for p in answer.remaining_partitions] == [
        ("orders", 1)
    ]
    assert shutdown_answer(FakeController([])).remaining_partitions == ()


def test_controlled_shutdown_refused_off_the_controller_or_for_a_stale_epoch() -> None:
    moved = shutdown_answer(FakeController(ControllerMovedError("not me")))
    assert moved.error_code != ErrorCode.none and moved.remaining_partitions == ()
    stale = shutdown_answer(FakeController(BrokerEpochMismatchError("old")))
    assert stale.error_code == error_code_for(StaleBrokerEpochError())
    assert stale.error_code != ErrorCode.none
