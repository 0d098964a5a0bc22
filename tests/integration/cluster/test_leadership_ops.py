"""Leadership operations on three real broker processes: ElectLeaders (our client, the CLI,
kafka-python's admin client), auto leader rebalance, and KIP-455 partition reassignment with
catch-up before the old replica is dropped, listing and cancellation; NOT_CONTROLLER elsewhere."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient
from kazoo.client import KazooClient

from brokers.client import Admin, ClientConfig, TopicPartition
from brokers.client.connection import BrokerConnection
from brokers.client.messages import make, request_module
from brokers.client.topics import NewTopic
from brokers.controller import zk_paths
from brokers.controller.state import ReplicaAssignment
from brokers.records.batch import iter_headers
from brokers.records.errors import CorruptRecordError
from brokers.wire.errors import ErrorCode
from infra.stack import BrokerProcess
from pier.cli import main
from tests.cluster_probes import SETTLE_S, TOPIC_SETTLING, metadata_of, start_registered, zk_read
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
SESSION = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "2000",
    "auto.leader.rebalance.enable": "false",
}


def start_three(broker_factory: Any, chroot: str, **extra: str) -> dict[int, BrokerProcess]:
    return start_registered(broker_factory, chroot, (1, 2, 3), {**SESSION, **extra})


def wait_led(broker: BrokerProcess, topic: str) -> Any:
    """Partition 0 of a topic just created, once `broker`'s metadata names its leader."""
    return wait_until(
        lambda: (p := partition_view(broker, topic)).leader >= 0 and p,
        what=f"{topic} led",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,  # the broker not told of the new topic yet
    )


def admin_call(broker: BrokerProcess, operation: str, *args: Any, **kwargs: Any) -> Any:
    async def run() -> Any:
        config = ClientConfig(request_timeout_s=10.0)
        async with Admin.for_bootstrap(broker.bootstrap, config) as admin:
            return await getattr(admin, operation)(*args, **kwargs)

    return asyncio.run(run())


def partition_view(broker: BrokerProcess, topic: str, partition: int = 0) -> Any:
    return metadata_of(broker).topic(topic).partitions[partition]


def leader_everywhere(
    brokers: Iterable[BrokerProcess], topic: str, leader: int, partition: int = 0
) -> bool:
    return all(partition_view(b, topic, partition).leader == leader for b in brokers)


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    status = main(["cluster", *argv, "--json"])
    out = capsys.readouterr().out
    return status, json.loads(out) if out.strip() else None


def send_to(broker: BrokerProcess, api_key: int, version: int, name: str, **fields: Any) -> Any:
    """One request straight to `broker` (no controller lookup)."""

    async def exchange() -> Any:
        connection = await BrokerConnection.connect(broker.host, broker.port, ClientConfig())
        try:
            return await connection.send(make(request_module(api_key, version), name, **fields))
        finally:
            await connection.aclose()

    return asyncio.run(exchange())


# --- preferred election ------------------------------------------------------------------------


def test_preferred_election_after_a_bounce_and_not_controller_elsewhere(
    chroot: str, broker_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    brokers = start_three(broker_factory, chroot)
    assert admin_call(brokers[1], "create_topics", [NewTopic("prefs", 1, 3)]) == {"prefs": None}
    first = wait_led(brokers[1], "prefs")
    preferred = first.replicas[0]
    assert first.leader == preferred
    brokers[preferred].restart()  # SIGTERM: controlled shutdown moves the leadership away
    others = [b for n, b in brokers.items() if n != preferred]

    def back_in_sync_but_not_leading() -> Any:
        p = partition_view(others[0], "prefs")
        return p if preferred in p.isr and p.leader not in (preferred, -1) else None

    moved = wait_until(
        back_in_sync_but_not_leading,
        what=f"the restarted {preferred} back in the ISR, not leading",
        timeout=SETTLE_S,
    )
    assert moved
    controller = metadata_of(others[0]).controller_id
    bystander = next(b for n, b in brokers.items() if n != controller)
    topics = [make(request_module(43, 2), "TopicPartitions", topic="prefs", partitions=(0,))]
    refused = send_to(
        bystander, 43, 2, "ElectLeadersRequest", election_type=0, topic_partitions=tuple(topics)
    )
    assert refused.error_code == ErrorCode.not_controller
    assert partition_view(others[0], "prefs").leader == moved.leader, "nothing was elected"

    status, rows = cli_json(
        capsys, "elect-leaders", "--bootstrap", bystander.bootstrap, "--topic", "prefs"
    )
    assert status == 0 and rows == [
        {"topic": "prefs", "partition": 0, "error": None, "message": None}
    ]
    every_broker_sees = functools.partial(leader_everywhere, brokers.values(), "prefs", preferred)
    wait_until(
        every_broker_sees,
        what=f"every broker's metadata names the preferred leader {preferred} again",
        timeout=SETTLE_S,
    )
    after = partition_view(bystander, "prefs")
    assert after.leader_epoch > moved.leader_epoch

    again = admin_call(bystander, "elect_leaders", [TopicPartition("prefs", 0)])
    error = again[TopicPartition("prefs", 0)]
    assert error is not None and error.code == ErrorCode.election_not_needed
    assert admin_call(bystander, "elect_leaders", None) == {}, "all: not-needed ones left out"
    unknown = admin_call(bystander, "elect_leaders", [TopicPartition("nope", 0)])
    assert unknown[TopicPartition("nope", 0)].code == ErrorCode.unknown_topic_or_partition

    # kafka-python's admin client finds the controller itself and reads the same answer.
    client = KafkaAdminClient(bootstrap_servers=bystander.bootstrap, request_timeout_ms=10000)
    try:
        answer = client.elect_leaders(0, {"prefs": [0]}, raise_errors=False)
    finally:
        client.close()
    codes = [p[1] for t in answer.replica_election_results for p in t[1]]
    assert codes == [ErrorCode.election_not_needed]


def test_auto_leader_rebalance_returns_leadership_to_the_preferred_replica(
    chroot: str, broker_factory: Any
) -> None:
    brokers = start_three(
        broker_factory,
        chroot,
        **{
            "auto.leader.rebalance.enable": "true",
            "leader.imbalance.check.interval.seconds": "1",
        },
    )
    assert admin_call(brokers[1], "create_topics", [NewTopic("auto", 1, 3)]) == {"auto": None}
    first = wait_led(brokers[1], "auto")
    preferred = first.replicas[0]
    survivor = brokers[next(n for n in brokers if n != preferred)]
    brokers[preferred].stop()
    moved = wait_until(
        lambda: (
            (p := partition_view(survivor, "auto")).leader not in (preferred, -1)
            and preferred not in p.isr
            and p
        ),
        what=f"leadership moved off the stopped {preferred}",
        timeout=SETTLE_S,
    )
    assert moved
    assert moved.leader in first.isr
    brokers[preferred].restart()
    back = wait_until(
        lambda: (p := partition_view(survivor, "auto")).leader == preferred and p,
        what=f"leadership back on the preferred {preferred}",
        timeout=SETTLE_S,
    )
    assert back
    assert preferred in back.isr and back.leader_epoch > moved.leader_epoch


# --- reassignment --------------------------------------------------------------------------------


def create_on(chroot: str, topic: str, replicas: tuple[int, ...]) -> None:
    """A one-partition topic on exactly `replicas`, written as Kafka's tools do in ZooKeeper."""
    client = KazooClient(hosts=chroot)
    client.start(10)
    try:
        assignment = zk_paths.TopicAssignment(uuid.uuid4(), {0: ReplicaAssignment(replicas)})
        client.create(zk_paths.topic_path(topic), zk_paths.encode_topic(assignment))
    finally:
        client.stop()
        client.close()


def partition_dirs(broker: BrokerProcess, topic: str) -> list[Path]:
    return [p for p in broker.data_dir.rglob(f"{topic}-0") if p.is_dir()]


def batches_of(broker: BrokerProcess, topic: str) -> list[tuple[int, int, int]]:
    (directory,) = partition_dirs(broker, topic)
    data = b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
    return [(h.base_offset, h.last_offset_delta, h.crc) for _, h in iter_headers(memoryview(data))]


def test_reassignment_catches_up_before_dropping_the_old_replica_and_cancel_reverts(
    chroot: str, broker_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    brokers = start_three(broker_factory, chroot)
    controller = metadata_of(brokers[1]).controller_id
    newcomer = next(n for n in (1, 2, 3) if n != controller)  # frozen below: not the controller
    old, kept = controller, next(n for n in (1, 2, 3) if n not in (controller, newcomer))
    for topic in ("moving", "revert"):
        create_on(chroot, topic, (old, kept))
    wait_until(
        lambda: all(
            sorted(partition_view(brokers[kept], t).isr) == sorted((old, kept))
            for t in ("moving", "revert")
        ),
        what=f"moving and revert in sync on {old} and {kept}",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,  # topics written to ZooKeeper, not handed out yet
    )
    producer = KafkaProducer(bootstrap_servers=brokers[kept].bootstrap, acks="all", retries=5)
    try:
        for i in range(200):
            producer.send("moving", value=f"record-{i}".encode(), partition=0)
        producer.flush(30)
    finally:
        producer.close()

    os.kill(brokers[newcomer].pid, signal.SIGSTOP)  # registered, but it cannot fetch anything
    tp, rv = TopicPartition("moving", 0), TopicPartition("revert", 0)
    started = admin_call(
        brokers[kept], "alter_partition_reassignments", {tp: [kept, newcomer], rv: [kept, newcomer]}
    )
    assert started == {tp: None, rv: None}
    in_flight = admin_call(brokers[kept], "list_partition_reassignments")
    assert set(in_flight) == {tp, rv}
    assert in_flight[tp].replicas == (kept, newcomer, old)
    assert (in_flight[tp].adding, in_flight[tp].removing) == ((newcomer,), (old,))
    stored = json.loads(zk_read(chroot, zk_paths.topic_path("moving"))[0])
    assert stored["partitions"]["0"] == [kept, newcomer, old]
    assert stored["adding_replicas"] == {"0": [newcomer]}
    assert stored["removing_replicas"] == {"0": [old]}

    # Cancel reverts: the original replica set, nothing adding or removing, nothing listed.
    assert admin_call(brokers[kept], "alter_partition_reassignments", {rv: None}) == {rv: None}
    reverted = json.loads(zk_read(chroot, zk_paths.topic_path("revert"))[0])
    assert sorted(reverted["partitions"]["0"]) == sorted((old, kept))
    assert reverted["adding_replicas"] == {} and reverted["removing_replicas"] == {}
    again = admin_call(brokers[kept], "alter_partition_reassignments", {rv: None})
    assert again[rv] is not None and again[rv].code == ErrorCode.no_reassignment_in_progress
    wait_until(
        lambda: sorted(partition_view(brokers[kept], "revert").replicas) == sorted((old, kept)),
        what="revert's replica set restored",
        timeout=SETTLE_S,
    )

    # The newcomer dies without catching up: the move stays in flight, the old replica stays.
    brokers[newcomer].kill()
    wait_until(
        lambda: newcomer not in metadata_of(brokers[kept]).brokers,
        what=f"the killed {newcomer} gone from the metadata",
        timeout=SETTLE_S,
    )
    status, rows = cli_json(capsys, "reassignments", "--bootstrap", brokers[kept].bootstrap)
    assert status == 0 and rows == [
        {
            "topic": "moving",
            "partition": 0,
            "replicas": [kept, newcomer, old],
            "adding": [newcomer],
            "removing": [old],
        }
    ]
    assert partition_dirs(brokers[old], "moving")
    assert partition_view(brokers[kept], "moving").leader == old

    # Back, it catches up; then the move completes: the old replica's log is deleted.
    brokers[newcomer].restart()
    wait_until(
        lambda: admin_call(brokers[kept], "list_partition_reassignments") == {},
        what="no reassignment in flight",
        timeout=SETTLE_S,
    )

    def moved_everywhere() -> bool:
        views = [partition_view(b, "moving") for b in brokers.values()]
        return all(
            p.replicas == (kept, newcomer)
            and p.leader == kept
            and sorted(p.isr) == sorted((kept, newcomer))
            for p in views
        )

    wait_until(moved_everywhere, what="moving on its new replicas everywhere", timeout=SETTLE_S)
    wait_until(
        lambda: partition_dirs(brokers[old], "moving") == [],
        what=f"the old replica's log deleted on {old}",
        timeout=SETTLE_S,
    )
    stored = json.loads(zk_read(chroot, zk_paths.topic_path("moving"))[0])
    assert stored["partitions"]["0"] == [kept, newcomer] and stored["adding_replicas"] == {}
    wait_until(
        lambda: batches_of(brokers[newcomer], "moving") == batches_of(brokers[kept], "moving"),
        what="identical batches on the new replicas",
        timeout=SETTLE_S,
        retry_on=(CorruptRecordError,),  # a batch being appended is read half-written
    )
    assert sum(count + 1 for _, count, _ in batches_of(brokers[kept], "moving")) == 200

    consumer = KafkaConsumer(
        bootstrap_servers=brokers[newcomer].bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10000,
    )
    try:
        consumer.assign([KafkaTopicPartition("moving", 0)])
        values = [m.value for m in consumer][:200]
    finally:
        consumer.close()
    assert values == [f"record-{i}".encode() for i in range(200)]

    # kafka-python's admin client lists reassignments too (none now).
    client = KafkaAdminClient(bootstrap_servers=brokers[old].bootstrap, request_timeout_ms=10000)
    try:
        assert client.list_partition_reassignments() == {}
    finally:
        client.close()


def test_reassignment_requests_to_a_non_controller_are_refused(
    chroot: str, broker_factory: Any
) -> None:
    brokers = start_registered(broker_factory, chroot, (1, 2), SESSION)
    controller = metadata_of(brokers[1]).controller_id
    bystander = brokers[next(n for n in brokers if n != controller)]
    listed = send_to(bystander, 46, 0, "ListPartitionReassignmentsRequest", topics=None)
    assert listed.error_code == ErrorCode.not_controller
    altered = send_to(bystander, 45, 0, "AlterPartitionReassignmentsRequest", topics=())
    assert altered.error_code == ErrorCode.not_controller
    # Unknown partitions and invalid targets, at the controller.
    bad = admin_call(
        brokers[1],
        "alter_partition_reassignments",
        {TopicPartition("nope", 0): [1], TopicPartition("nope", 1): None},
    )
    assert {tp: e.code for tp, e in bad.items()} == {
        TopicPartition("nope", 0): ErrorCode.unknown_topic_or_partition,
        TopicPartition("nope", 1): ErrorCode.unknown_topic_or_partition,
    }
    assert admin_call(brokers[1], "create_topics", [NewTopic("rf", 1, 1)]) == {"rf": None}
    wait_led(brokers[1], "rf")
    rf = TopicPartition("rf", 0)
    refused = admin_call(brokers[1], "alter_partition_reassignments", {rf: [1, 9]})
    assert refused[rf].code == ErrorCode.invalid_replica_assignment, "broker 9 is not alive"
    duplicate = admin_call(brokers[1], "alter_partition_reassignments", {rf: [2, 2]})
    assert duplicate[rf].code == ErrorCode.invalid_replica_assignment


# --- the CLI's input checks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["elect-leaders", "--partition", "0"],
        ["elect-leaders", "--topic", "t", "--partition", "x"],
        ["reassign", "--topic", "t", "--partition", "0"],
        ["reassign", "--topic", "t", "--partition", "0", "--replicas", "1,x"],
        ["reassign", "--topic", "t", "--partition", "0", "--replicas", "1,1"],
        ["reassign", "--topic", "t", "--partition", "0", "--replicas", "1", "--cancel"],
        ["reassign", "--partition", "0", "--cancel"],
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cluster", *argv, "--bootstrap", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pier: error: ") and err.count("\n") == 1


# --- a new controller resumes reassignments found in ZooKeeper -------------------------------------


def test_a_new_controller_resumes_in_flight_reassignments(chroot: str) -> None:
    from brokers.controller import requests as rq
    from brokers.controller.controller import Controller
    from brokers.controller.election import ControllerElection
    from brokers.controller.state import LeaderAndIsr
    from brokers.controller.state import TopicPartition as TP
    from brokers.controller.zk_isr_writer import ZkIsrWriter
    from tests.integration.cluster.test_controller import (
        CLOCK,
        RecordingChannel,
        register,
        state,
        until,
    )

    moving = ReplicaAssignment((2, 3, 1), adding=(3,), removing=(1,))
    p0, p1 = TP("orders", 0), TP("orders", 1)

    async def scenario() -> None:
        nodes = {b: await register(chroot, b) for b in (1, 2, 3)}
        zk = nodes[1][0]
        topic = zk_paths.TopicAssignment(uuid.uuid4(), {0: moving, 1: moving})
        await zk.create(zk_paths.topic_path("orders"), zk_paths.encode_topic(topic))
        for tp, isr in ((p0, (1, 2, 3)), (p1, (1, 2))):  # p0 caught up before the old one died
            await zk.ensure_path(zk_paths.partition_state_path(tp).rsplit("/", 1)[0])
            data = zk_paths.encode_partition_state(LeaderAndIsr(1, 5, isr, 1))
            await zk.create(zk_paths.partition_state_path(tp), data)
        channel = RecordingChannel()
        election = ControllerElection(zk, 1, CLOCK)
        controller = Controller(zk, election, channel, auto_rebalance=False)
        election.follow(controller.on_elected, controller.on_resigned)
        assert await election.start()

        def settled(tp: TP) -> bool:
            assignment = controller.context.assignments.get(tp)
            return assignment is not None and not assignment.is_reassigning

        await until(lambda: settled(p0), what="the reassignment of orders-0 done")
        done = await state(zk, p0)
        assert done is not None and (done.leader, done.isr) == (2, (2, 3))
        stored = zk_paths.decode_topic((await zk.get(zk_paths.topic_path("orders"))).data)
        assert stored.partitions[0] == ReplicaAssignment((2, 3))
        assert stored.partitions[1] == moving, "p1 is still waiting for broker 3"
        stops = [
            (p.partition_index, p.delete_partition)
            for r in channel.of(rq.StopReplicaRequest, 1)
            for t in r.topic_states
            for p in t.partition_states
        ]
        assert (0, True) in stops and (1, True) not in stops
        restarted = [
            p
            for r in channel.of(rq.LeaderAndIsrRequest, 3)
            for t in r.topic_states
            for p in t.partition_states
            if p.partition_index == 1
        ]
        assert restarted and restarted[-1].is_new and restarted[-1].leader_epoch == 6
        assert restarted[-1].adding_replicas == (3,)

        # Broker 3 catches up: the leader's ISR change completes p1 too.
        current = await state(zk, p1)
        assert current is not None
        writer = ZkIsrWriter(zk, broker_id=1, notify_delay_s=60)
        await writer.write_isr(
            "orders",
            1,
            current.leader_epoch,
            [1, 2, 3],
            current.zk_version,
            current.controller_epoch,
        )
        await writer.flush()
        await until(lambda: settled(p1), what="the reassignment of orders-1 done")
        finished = await state(zk, p1)
        assert finished is not None and finished.leader == 2 and 1 not in finished.isr
        await controller.close()
        await writer.close()
        for b in (1, 2, 3):
            await nodes[b][0].close()

    asyncio.run(scenario())
