"""Consumer groups against a real in-process broker through real clients: confluent-kafka
(librdkafka), kafka-python, aiokafka and kcat. Partition split, committed offsets across a broker
restart, auto.offset.reset, and the admin views of groups."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaConsumer

from brokers.app.runtime import Broker
from tests.integration.inproc import broker_thread
from tests.polling import wait_until, wait_until_async

pytestmark = pytest.mark.integration
WAIT_S = 60.0
SESSION_MS = 6000
PROPERTIES = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5"}
Assignment = set[tuple[str, int]]


# ---- helpers shared by the group integration tests ------------------------------------------
def bootstrap_of(broker: Broker) -> str:
    return f"127.0.0.1:{broker.port}"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with broker_thread(tmp_path, PROPERTIES) as running:
        yield running


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.create_topics([NewTopic(topic, partitions, 1)]).values()
    future.result(timeout=WAIT_S)


def produce(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2})
    for i in range(start, start + count):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(WAIT_S) == 0


def confluent_consumer(bootstrap: str, group: str, **extra: Any) -> Consumer:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": 500,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    config.update(extra)
    return Consumer(config)


def consume_until(
    consumers: Sequence[Consumer],
    done: Callable[[], bool],
    on_message: Callable[[Consumer, Any], None] | None = None,
    *,
    what: str,
    timeout_s: float = WAIT_S,
) -> None:
    """Poll every consumer in turn (which also runs their group protocol) until `done()`."""

    def step() -> bool:
        if done():
            return True
        for consumer in consumers:
            message = consumer.poll(0.05)
            if message is not None and message.error() is None and on_message is not None:
                on_message(consumer, message)
        return done()

    wait_until(step, what=what, timeout=timeout_s, interval=0)


def assigned(consumer: Consumer) -> Assignment:
    return {(tp.topic, tp.partition) for tp in consumer.assignment()}


def is_split(assignments: Sequence[Assignment], topic: str, partitions: int) -> bool:
    union: Assignment = set().union(*assignments)
    disjoint = sum(len(a) for a in assignments) == len(union)
    whole = union == {(topic, p) for p in range(partitions)}
    return disjoint and whole and all(assignments)


def group_generation(broker: Broker, group: str) -> int:
    return broker.groups.coordinator.groups[group].generation_id


# ---- partition split, per client ------------------------------------------------------------
def test_confluent_consumers_split_partitions_and_commit(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, "split", 6)
    produce(bootstrap, "split", 60, 6)
    consumers = [confluent_consumer(bootstrap, "g-confluent") for _ in range(3)]
    seen: dict[int, set[tuple[int, int]]] = {i: set() for i in range(3)}
    try:
        for consumer in consumers:
            consumer.subscribe(["split"])

        def record(consumer: Consumer, message: Any) -> None:
            seen[consumers.index(consumer)].add((message.partition(), message.offset()))

        consume_until(
            consumers,
            lambda: is_split([assigned(c) for c in consumers], "split", 6),
            record,
            what="split's six partitions split among the three consumers",
        )
        assert [len(assigned(c)) for c in consumers] == [2, 2, 2]

        def all_read() -> bool:  # every owner is at the end of each partition it owns
            positions = [p.offset for c in consumers for p in c.position(list(c.assignment()))]
            return len(positions) == 6 and positions == [10] * 6

        consume_until(consumers, all_read, record, what="every partition read to its end")
        assert set().union(*seen.values()) == {(p, o) for p in range(6) for o in range(10)}
        for consumer in consumers:
            consumer.commit(asynchronous=False)
        committed = consumers[0].committed([TopicPartition("split", p) for p in range(6)], 30)
        assert sorted(tp.offset for tp in committed) == [10] * 6
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in broker.groups.metrics.collect()
            for s in family.samples
        }
        assert samples[("kafka_consumergroup_members", (("group", "g-confluent"),))] == 3
        labels = (("group", "g-confluent"), ("partition", "0"), ("topic", "split"))
        assert samples[("kafka_consumergroup_lag", labels)] == 0
    finally:
        for consumer in consumers:
            consumer.close()


def test_kafka_python_consumers_split_partitions(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, "kp-split", 6)
    consumers = [
        KafkaConsumer(
            "kp-split",
            bootstrap_servers=bootstrap,
            group_id="g-kafka-python",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            enable_auto_commit=False,
        )
        for _ in range(3)
    ]
    try:

        def split() -> bool:
            assignments = [{(t.topic, t.partition) for t in c.assignment()} for c in consumers]
            if is_split(assignments, "kp-split", 6):
                return True
            for consumer in consumers:
                # kafka-python's I/O thread runs the join; a main-thread poll that times out
                # mid-join makes it rejoin again, so give each poll longer than a join takes.
                consumer.poll(timeout_ms=300)
            return False

        wait_until(split, what="kp-split split among three consumers", timeout=WAIT_S, interval=0)
        from kafka.structs import OffsetAndMetadata
        from kafka.structs import TopicPartition as KpTopicPartition

        owner = consumers[0]
        [mine, *_] = sorted(owner.assignment(), key=lambda t: t.partition)
        owner.commit({mine: OffsetAndMetadata(7, "kp", -1)})
        assert owner.committed(KpTopicPartition("kp-split", mine.partition)) == 7
    finally:
        for consumer in consumers:
            consumer.close(autocommit=False)


def test_aiokafka_consumers_split_partitions(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, "aio-split", 6)

    async def scenario() -> list[int] | None:
        consumers = [
            AIOKafkaConsumer(
                "aio-split",
                bootstrap_servers=bootstrap,
                group_id="g-aiokafka",
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=500,
                enable_auto_commit=False,
            )
            for _ in range(3)
        ]
        for consumer in consumers:
            await consumer.start()

        async def split() -> list[int] | None:
            assignments = [{(t.topic, t.partition) for t in c.assignment()} for c in consumers]
            if is_split(assignments, "aio-split", 6):
                return [len(a) for a in assignments]
            await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
            return None

        try:
            return await wait_until_async(
                split, what="aio-split split among three consumers", timeout=WAIT_S, interval=0
            )
        finally:
            for consumer in consumers:
                await consumer.stop()

    assert asyncio.run(scenario()) == [2, 2, 2]


# ---- offsets ----------------------------------------------------------------------------------
def test_commits_survive_a_broker_restart_and_a_new_consumer_resumes(tmp_path: Path) -> None:
    processed: list[int] = []
    with broker_thread(tmp_path, PROPERTIES) as first:
        bootstrap = bootstrap_of(first)
        create_topic(bootstrap, "alo", 1)
        produce(bootstrap, "alo", 20, 1)
        consumer = confluent_consumer(bootstrap, "g-alo")
        consumer.subscribe(["alo"])

        def process_then_commit(c: Consumer, message: Any) -> None:
            if len(processed) < 10:
                processed.append(message.offset())
                c.commit(message=message, asynchronous=False)  # at-least-once: after processing

        try:
            consume_until(
                [consumer],
                lambda: len(processed) >= 10,
                process_then_commit,
                what="ten records processed and committed",
            )
        finally:
            consumer.close()
    with broker_thread(tmp_path, PROPERTIES) as second:
        bootstrap = bootstrap_of(second)
        resumed: list[int] = []
        consumer = confluent_consumer(bootstrap, "g-alo")
        consumer.subscribe(["alo"])
        try:
            consume_until(
                [consumer],
                lambda: len(resumed) >= 10,
                lambda _c, m: resumed.append(m.offset()),
                what="ten records after the committed offset",
            )
        finally:
            consumer.close()
    assert processed == list(range(10))
    assert resumed == list(range(10, 20))


def test_auto_offset_reset_earliest_and_latest(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, "reset", 1)
    produce(bootstrap, "reset", 5, 1)
    earliest = confluent_consumer(bootstrap, "g-earliest", **{"auto.offset.reset": "earliest"})
    latest = confluent_consumer(bootstrap, "g-latest", **{"auto.offset.reset": "latest"})
    got: dict[str, list[bytes]] = {"earliest": [], "latest": []}
    try:
        earliest.subscribe(["reset"])
        latest.subscribe(["reset"])

        def record(c: Consumer, m: Any) -> None:
            got["earliest" if c is earliest else "latest"].append(m.value())

        consume_until(
            [earliest, latest],
            lambda: bool(assigned(latest)) and len(got["earliest"]) == 5,
            record,
            what="latest assigned and earliest at the five records",
        )
        # latest resolves its start offset after the assignment: probe until it sees new data
        while not got["latest"]:
            produce(bootstrap, "reset", 1, 1, start=100)
            consume_until(
                [latest], lambda: bool(got["latest"]), record, what="a probe record at latest"
            )
        produce(bootstrap, "reset", 3, 1, start=5)
        consume_until(
            [latest],
            lambda: got["latest"][-3:] == [b"v5", b"v6", b"v7"],
            record,
            what="the three new records at latest",
        )
        assert got["earliest"][:5] == [b"v%d" % i for i in range(5)]
        assert not {b"v%d" % i for i in range(5)} & set(got["latest"])
    finally:
        earliest.close()
        latest.close()


def test_kcat_consumes_as_a_group(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, "kcat-g", 2)
    produce(bootstrap, "kcat-g", 10, 2)
    command = [
        "kcat", "-b", bootstrap, "-G", "g-kcat", "kcat-g", "-o", "beginning", "-e", "-q",
        "-f", "%p:%o\\n", "-X", "session.timeout.ms=6000", "-X", "enable.auto.commit=true",
        "-X", "auto.commit.interval.ms=100",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, timeout=WAIT_S, check=False)
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.decode().split())
    assert lines == sorted(f"{p}:{o}" for p in range(2) for o in range(5))
    coordinator = broker.groups.coordinator

    def committed() -> bool:  # the group and its final commits are visible once kcat has left
        group = coordinator.groups.get("g-kcat")
        offsets = {tp: v.offset for tp, v in group.offsets.items()} if group else {}
        return offsets == {("kcat-g", 0): 5, ("kcat-g", 1): 5}

    wait_until(committed, what="kcat's final commits at offset 5", timeout=WAIT_S)
    assert coordinator.groups["g-kcat"].protocol_type == "consumer"


def test_admin_client_lists_describes_and_deletes_groups(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, "adm", 2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    consumer = confluent_consumer(bootstrap, "g-admin", **{"client.id": "admin-test"})
    try:
        consumer.subscribe(["adm"])
        consume_until(
            [consumer], lambda: len(assigned(consumer)) == 2, what="both partitions assigned"
        )
        consumer.commit(offsets=[TopicPartition("adm", 0, 1)], asynchronous=False)
        listed = admin.list_consumer_groups().result(timeout=WAIT_S)
        assert "g-admin" in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups(["g-admin"])["g-admin"].result(timeout=WAIT_S)
        assert str(described.state).endswith("STABLE")
        [member] = described.members
        assert member.client_id == "admin-test"
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1}
        from confluent_kafka import ConsumerGroupTopicPartitions

        request = [ConsumerGroupTopicPartitions("g-admin", [TopicPartition("adm", 0)])]
        [offsets_future] = admin.list_consumer_group_offsets(request).values()
        assert offsets_future.result(timeout=WAIT_S).topic_partitions[0].offset == 1
        busy = admin.delete_consumer_groups(["g-admin"])["g-admin"]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            busy.result(timeout=WAIT_S)
    finally:
        consumer.close()
    admin.delete_consumer_groups(["g-admin"])["g-admin"].result(timeout=WAIT_S)
    assert "g-admin" not in broker.groups.coordinator.groups
