"""New single-replica partitions in ZooKeeper mode are led before their logs exist (the replica
manager's deferred leaders, issue 25: a broker's memory with 10,000 partitions): no directory
until a partition is first used, yet DescribeLogDirs and the ReplicaManager gauges count every
one. A topic config altered meanwhile is the one its logs start with. A partition's first produce
creates its log with its leader-epoch checkpoint before the data; after `kill -9` and a restart the used log is recovered, the unused ones are led again
without logs, and every partition takes records with its epoch starting where its data starts.
A partition still without a log answers OffsetForLeaderEpoch, ListOffsets and DescribeProducers
as Kafka's empty partition, and takes a follower or moves to another broker before any produce."""

from __future__ import annotations

import asyncio
import urllib.request
from typing import Any
from urllib.error import URLError

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.admin import NewTopic as KafkaNewTopic  # type: ignore[attr-defined]
from prometheus_client.parser import text_string_to_metric_families

from brokers.client.admin import Admin
from brokers.client.log_dirs import describe_log_dirs
from brokers.client.metadata import TopicPartition as PierTopicPartition
from brokers.client.topics import NewTopic
from brokers.log.checkpoints import LEADER_EPOCH_FORMAT, CheckpointFile
from brokers.wire.entities import make, request_module
from brokers.wire.errors import ErrorCode
from infra.stack import BrokerProcess, free_port
from tests.cluster_probes import (
    BROKER_UNREACHABLE,
    SETTLE_S,
    TOPIC_SETTLING,
    metadata_of,
    start_registered,
)
from tests.integration.cluster.test_leadership_ops import admin_call, partition_view, send_to
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
TOPIC = "fresh"
PARTITIONS = 40
# The killed broker's registration goes with its session: a short one keeps the restart quick.
SESSION = {"zookeeper.session.timeout.ms": "4000"}


def _epochs(broker: BrokerProcess, partition: int) -> list[tuple[int, int]]:
    path = broker.data_dir / f"{TOPIC}-{partition}" / "leader-epoch-checkpoint"
    return CheckpointFile(path, LEADER_EPOCH_FORMAT).read()


def _log_dirs(broker: BrokerProcess) -> set[int]:
    """The partitions of TOPIC with a directory on disk."""
    return {
        int(d.name.rpartition("-")[2])
        for d in broker.data_dir.iterdir()
        if d.is_dir() and d.name.rpartition("-")[0] == TOPIC
    }


def _led(broker: BrokerProcess) -> dict[int, int] | None:
    """{partition: leader epoch} once every partition of TOPIC is led by the broker."""
    topic = metadata_of(broker).topics.get(TOPIC)
    if topic is None or len(topic.partitions) != PARTITIONS:
        return None
    if any(p.leader != broker.node_id for p in topic.partitions.values()):
        return None
    return {p.partition: p.leader_epoch for p in topic.partitions.values()}


def _sizes(broker: BrokerProcess) -> dict[int, int]:
    async def ask() -> dict[PierTopicPartition, int]:
        async with Admin.for_bootstrap(broker.bootstrap) as admin:
            return await describe_log_dirs(admin.cluster, node_id=broker.node_id)

    return {tp.partition: size for tp, size in asyncio.run(ask()).items() if tp.topic == TOPIC}


def _gauge(broker: BrokerProcess, name: str) -> float:
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return float(sample.value)
    raise AssertionError(f"{name} not exported")


def _produce(broker: BrokerProcess, partitions: range) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for partition in partitions:
        producer.produce(TOPIC, value=f"v{partition}".encode(), partition=partition)
    assert producer.flush(30) == 0


def _log_append_time(broker: BrokerProcess) -> None:
    """Alter the topic to message.timestamp.type=LogAppendTime; return once the broker has it."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry(
        "message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)

    def applied() -> bool:  # served from the cache the broker updates with its logs
        described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, TOPIC)])
        configs = next(iter(described.values())).result(30)
        return bool(configs["message.timestamp.type"].value == "LogAppendTime")

    wait_until(applied, what="the altered config applied", timeout=SETTLE_S)


def _read_all(broker: BrokerProcess) -> dict[int, list[tuple[bytes | None, int]]]:
    """{partition: [(value, timestamp type)]} of every record of TOPIC."""
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "deferred", "enable.auto.commit": False}
    )
    seen: dict[int, list[tuple[bytes | None, int]]] = {}
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])

        def all_read() -> bool:
            for message in consumer.consume(100, timeout=0.5):
                partition = message.partition()
                if message.error() is None and partition is not None:
                    kind = message.timestamp()[0]
                    seen.setdefault(partition, []).append((message.value(), kind))
            return sum(len(v) for v in seen.values()) == PARTITIONS + 1

        wait_until(all_read, what="every record back", timeout=SETTLE_S)
    finally:
        consumer.close()
    return seen


def test_single_replica_logs_are_created_at_first_use_and_survive_a_kill(
    chroot: str, broker_factory: Any
) -> None:
    broker = broker_factory(node_id=1, zookeeper=chroot, config=SESSION, metrics_port=free_port())

    async def create() -> dict[str, Any]:
        async with Admin.for_bootstrap(broker.bootstrap) as admin:
            return await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])

    assert asyncio.run(create()) == {TOPIC: None}
    led = wait_until(
        lambda: _led(broker), what=f"{TOPIC} led", timeout=SETTLE_S, retry_on=TOPIC_SETTLING
    )
    assert led is not None
    assert _log_dirs(broker) == set()  # led, no log yet
    assert _sizes(broker) == dict.fromkeys(range(PARTITIONS), 0)  # listed all the same
    leaders = _gauge(broker, "kafka_server_replicamanager_leadercount")
    assert leaders >= PARTITIONS
    assert _gauge(broker, "kafka_server_replicamanager_partitioncount") >= PARTITIONS

    _log_append_time(broker)  # while no log exists
    assert _log_dirs(broker) == set()
    _produce(broker, range(1))
    assert _log_dirs(broker) == {0}
    assert _epochs(broker, 0) == [(led[0], 0)]  # the epoch went to disk with the log
    assert _gauge(broker, "kafka_server_replicamanager_leadercount") == leaders  # not twice

    broker.kill()
    broker.restart()
    again = wait_until(
        lambda: _led(broker),
        what=f"{TOPIC} led after the restart",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING + BROKER_UNREACHABLE,
    )
    assert again is not None
    assert _log_dirs(broker) == {0}  # nothing to recover for the others, nothing made up
    wait_until(
        lambda: _gauge(broker, "kafka_server_replicamanager_leadercount") == leaders,
        what="the gauges after the restart",
        timeout=SETTLE_S,
        retry_on=(URLError, ConnectionError),
    )

    _produce(broker, range(PARTITIONS))
    seen = _read_all(broker)
    appended = TIMESTAMP_LOG_APPEND_TIME  # the altered config, also in the log made before the kill
    assert seen == {
        p: [(b"v0", appended)] * 2 if p == 0 else [(f"v{p}".encode(), appended)]
        for p in range(PARTITIONS)
    }
    assert _log_dirs(broker) == set(range(PARTITIONS))
    assert _epochs(broker, 0)[0] == (led[0], 0)
    assert {p: _epochs(broker, p) for p in range(1, PARTITIONS)} == {
        p: [(again[p], 0)] for p in range(1, PARTITIONS)
    }


def _offset_for_epoch(broker: BrokerProcess, topic: str, partition: int, epoch: int) -> Any:
    module = request_module(23, 4)
    wanted = make(
        module,
        "OffsetForLeaderPartition",
        partition=partition,
        current_leader_epoch=epoch,
        leader_epoch=epoch,
    )
    asked = make(module, "OffsetForLeaderTopic", topic=topic, partitions=(wanted,))
    answer = send_to(broker, 23, 4, "OffsetForLeaderEpochRequest", replica_id=-1, topics=(asked,))
    (result,) = answer.topics[0].partitions
    return result.error_code, result.leader_epoch, result.end_offset


def test_a_partition_led_without_a_log_answers_reads_and_moves_before_its_first_produce(
    chroot: str, broker_factory: Any
) -> None:
    """Kafka's answers for an empty partition, each API the first to touch a partition of "idle"
    (so each creates its log): OffsetForLeaderEpoch the epoch's end 0, ListOffsets 0 and 0, no
    producers; a follower added before any produce (a move to another broker:
    `test_a_partition_moved_to_another_broker_before_its_first_produce`)."""
    brokers = start_registered(broker_factory, chroot, (1, 2), SESSION)
    one = brokers[1]
    admin = AdminClient({"bootstrap.servers": one.bootstrap})
    topics = [
        KafkaNewTopic(t, n, replica_assignment=[[1]] * n) for t, n in (("idle", 3), ("grown", 1))
    ]
    for future in admin.create_topics(topics).values():
        future.result(30)
    led = wait_until(
        lambda: all(
            p.leader == 1
            for t in ("idle", "grown")
            for p in metadata_of(brokers[2]).topic(t).partitions.values()
        ),
        what="the topics led by broker 1",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,
    )
    assert led and not [
        d for d in one.data_dir.iterdir() if d.name.rpartition("-")[0] in ("idle", "grown")
    ]
    epoch = metadata_of(one).topic("idle").partitions[0].leader_epoch
    assert _offset_for_epoch(one, "idle", 0, epoch) == (ErrorCode.none, epoch, 0)
    consumer = Consumer({"bootstrap.servers": one.bootstrap, "group.id": "reads"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("idle", 1), timeout=10) == (0, 0)
    finally:
        consumer.close()
    module = request_module(61, 0)
    wanted = make(module, "TopicRequest", name="idle", partition_indexes=(2,))
    producers = send_to(one, 61, 0, "DescribeProducersRequest", topics=(wanted,))
    (described,) = producers.topics[0].partitions
    assert (described.error_code, described.active_producers) == (ErrorCode.none, ())

    _reassign_then_produce(brokers, {"grown": [1, 2]}, lambda: (
        sorted(partition_view(brokers[2], "grown").isr) == [1, 2]
    ))  # fmt: skip


def _reassign_then_produce(
    brokers: dict[int, BrokerProcess], targets: dict[str, list[int]], done: Any
) -> None:
    """Reassign partition 0 of each topic, wait for `done()`, then produce through broker 2
    and read the topics' watermarks back (0 to the records produced)."""
    one = brokers[1]
    moves = {PierTopicPartition(topic, 0): replicas for topic, replicas in targets.items()}
    admin_call(one, "alter_partition_reassignments", moves)
    wait_until(
        lambda: admin_call(one, "list_partition_reassignments") == {} and done(),
        what=f"reassigned: {targets}",
        timeout=SETTLE_S,
    )
    producer = Producer({"bootstrap.servers": brokers[2].bootstrap, "acks": "all"})
    for count, topic in enumerate(targets, start=2):
        for i in range(count):
            producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": brokers[2].bootstrap, "group.id": "reads"})
    try:
        for count, topic in enumerate(targets, start=2):
            marks = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            assert marks == (0, count), topic
    finally:
        consumer.close()


def test_a_partition_moved_to_another_broker_before_its_first_produce(
    chroot: str, broker_factory: Any
) -> None:
    """A partition moved to broker 2 while another gains a follower, in one request."""
    brokers = start_registered(broker_factory, chroot, (1, 2), SESSION)
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    new = [KafkaNewTopic(t, 1, replica_assignment=[[1]]) for t in ("grown", "moved")]
    for future in admin.create_topics(new).values():
        future.result(30)
    wait_until(
        lambda: all(
            metadata_of(brokers[2]).topic(t).partitions[0].leader == 1 for t in ("grown", "moved")
        ),
        what="grown and moved led by broker 1",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,
    )
    _reassign_then_produce(brokers, {"grown": [1, 2], "moved": [2]}, lambda: (
        sorted(partition_view(brokers[2], "grown").isr) == [1, 2]
        and partition_view(brokers[2], "moved").leader == 2
    ))  # fmt: skip
