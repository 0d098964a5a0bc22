"""KIP-848 consumer groups (`group.protocol=consumer`) against a real in-process broker through
librdkafka (confluent-kafka): the server-side assignor splits a topic, a SIGKILLed member's
partitions move to the survivor after the broker's session timeout, and committed offsets are
honoured (nothing skipped, nothing committed read twice)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from brokers.app.runtime import Broker
from tests.integration.inproc import broker_thread
from tests.integration.test_groups_clients import (
    Assignment,
    assigned,
    bootstrap_of,
    consume_until,
    create_topic,
    produce,
)

pytestmark = pytest.mark.integration
WAIT_S = 60.0
PROPERTIES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.heartbeat.interval.ms": "300",
}

# The member that is SIGKILLed: prints each record only after its offset commit returned.
CHILD = r"""
import sys
from confluent_kafka import (
    Consumer,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
bootstrap, group, topic = sys.argv[1:4]
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
consumer.subscribe([topic])
announced = -1
while True:
    message = consumer.poll(0.05)
    size = len(consumer.assignment())
    if size != announced:
        announced = size
        print("ASSIGNED", size, flush=True)
    if message is None or message.error() is not None:
        continue
    consumer.commit(message=message, asynchronous=False)
    print("COMMITTED", message.value().decode(), flush=True)
"""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with broker_thread(tmp_path, PROPERTIES) as running:
        yield running


def kip848_consumer(bootstrap: str, group: str, **extra: Any) -> Consumer:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    config.update(extra)
    return Consumer(config)


class Child:
    """The child consumer's stdout, read line by line as it comes."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD, bootstrap, group, topic],
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        self._fd = self.process.stdout.fileno()
        os.set_blocking(self._fd, False)
        self.assigned = -1
        self.committed: set[str] = set()
        self._buffer = ""

    def read(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self._buffer += chunk.decode()
        *lines, self._buffer = self._buffer.split("\n")
        for line in lines:
            kind, _, value = line.partition(" ")
            if kind == "ASSIGNED":
                self.assigned = int(value)
            elif kind == "COMMITTED":
                self.committed.add(value)

    def kill(self) -> None:
        if self.process.stdout is None or self.process.stdout.closed:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(WAIT_S)
        self.read()
        if self.process.stdout is not None:
            self.process.stdout.close()


def describe_and_list(bootstrap: str, group_id: str, assignments: list[Assignment]) -> None:
    """Admin views through librdkafka: ConsumerGroupDescribe and ListGroups' type filter."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_consumer_groups([group_id]).values()
    described = future.result(timeout=WAIT_S)
    assert described.type == ConsumerGroupType.CONSUMER
    assert str(described.state.name) == "STABLE"
    assert described.partition_assignor == "uniform"
    members = [
        {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
        for m in described.members
    ]
    assert sorted(members, key=sorted) == sorted(assignments, key=sorted)
    listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(WAIT_S)
    assert [g.group_id for g in listed.valid] == [group_id]
    classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(WAIT_S)
    assert group_id not in [g.group_id for g in classic.valid]
    [deleted] = admin.delete_consumer_groups([group_id]).values()
    with pytest.raises(KafkaException) as refused:
        deleted.result(timeout=WAIT_S)
    assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP


def test_uniform_assignor_splits_a_topic_between_two_members(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, "kip848-split", 4)
    consumers = [kip848_consumer(bootstrap, "g-kip848-split") for _ in range(2)]
    try:
        for consumer in consumers:
            consumer.subscribe(["kip848-split"])
        consume_until(
            consumers,
            lambda: [len(assigned(c)) for c in consumers] == [2, 2],
            what="two partitions each",
        )
        first, second = (assigned(c) for c in consumers)
        assert not first & second
        assert first | second == {("kip848-split", p) for p in range(4)}
        group = broker.groups.coordinator.consumer_groups.groups["g-kip848-split"]
        epochs = {m.epoch for m in group.members.values()}
        assert epochs == {group.epoch}, "every member reconciled to the group epoch"
        owned = [TopicPartition(t, p, 0) for t, p in sorted(first)]
        consumers[0].commit(offsets=owned, asynchronous=False)  # member id + epoch (v9)
        committed = consumers[0].committed(owned, timeout=WAIT_S)
        assert [tp.offset for tp in committed] == [0] * len(owned)
        describe_and_list(bootstrap, "g-kip848-split", [first, second])
    finally:
        for consumer in consumers:
            consumer.close()


@pytest.mark.slow
def test_sigkilled_member_partitions_move_after_session_timeout(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    topic, group = "kip848-kill", "g-kip848-kill"
    create_topic(bootstrap, topic, 4)
    child = Child(bootstrap, group, topic)
    survivor = kip848_consumer(bootstrap, group)
    seen: list[str] = []

    def record(_consumer: Consumer, message: Any) -> None:
        survivor.commit(message=message, asynchronous=False)
        seen.append(message.value().decode())

    try:
        survivor.subscribe([topic])

        def split() -> bool:
            child.read()
            return child.assigned == 2 and len(assigned(survivor)) == 2

        consume_until([survivor], split, record, what="two partitions each")
        produce(bootstrap, topic, 40, 4)

        def all_read_once() -> bool:
            child.read()
            return len(child.committed) + len(seen) == 40

        consume_until([survivor], all_read_once, record, what="the first 40 records read")
        child.kill()
        produce(bootstrap, topic, 40, 4, start=40)
        consume_until(
            [survivor],
            lambda: len(assigned(survivor)) == 4,
            record,
            what="the survivor owns all four partitions",
        )
        consume_until([survivor], lambda: len(seen) >= 80 - len(child.committed), record,
                      what="every record not committed by the child")  # fmt: skip
        everything = {f"v{i}" for i in range(80)}
        assert len(seen) == len(set(seen)), "no record read twice by the survivor"
        assert not set(seen) & child.committed, "no record committed by the child read again"
        assert set(seen) | child.committed == everything, "no record skipped"
    finally:
        child.kill()
        survivor.close()
