"""New partitions in ZooKeeper mode: each one's leader-epoch checkpoint is on disk by the time the
partition is led (LeaderAndIsr writes them as one batch before answering), and after `kill -9` and
a restart every partition is served again with its epochs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from brokers.client.admin import Admin
from brokers.client.topics import NewTopic
from brokers.log.checkpoints import LEADER_EPOCH_FORMAT, CheckpointFile
from infra.stack import BrokerProcess
from tests.cluster_probes import BROKER_UNREACHABLE, SETTLE_S, TOPIC_SETTLING, metadata_of
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
TOPIC = "fresh"
PARTITIONS = 40  # several checkpoints in one LeaderAndIsr: the batch, not a lone write
# The killed broker's registration goes with its session: a short one keeps the restart quick.
SESSION = {"zookeeper.session.timeout.ms": "4000"}


def _epochs(broker: BrokerProcess, partition: int) -> list[tuple[int, int]]:
    path = broker.data_dir / f"{TOPIC}-{partition}" / "leader-epoch-checkpoint"
    return CheckpointFile(path, LEADER_EPOCH_FORMAT).read()


def _led(broker: BrokerProcess) -> dict[int, int] | None:
    """{partition: leader epoch} once every partition of TOPIC is led by the broker."""
    topic = metadata_of(broker).topics.get(TOPIC)
    if topic is None or len(topic.partitions) != PARTITIONS:
        return None
    if any(p.leader != broker.node_id for p in topic.partitions.values()):
        return None
    return {p.partition: p.leader_epoch for p in topic.partitions.values()}


def test_checkpoints_written_before_the_partitions_are_led_and_kept_through_a_kill(
    chroot: str, broker_factory: Any
) -> None:
    broker = broker_factory(node_id=1, zookeeper=chroot, config=SESSION)

    async def create() -> dict[str, Any]:
        async with Admin.for_bootstrap(broker.bootstrap) as admin:
            return await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])

    assert asyncio.run(create()) == {TOPIC: None}
    led = wait_until(
        lambda: _led(broker), what=f"{TOPIC} led", timeout=SETTLE_S, retry_on=TOPIC_SETTLING
    )
    assert led is not None
    # Written when LeaderAndIsr was answered, which is before the metadata names the leader.
    assert {p: _epochs(broker, p) for p in led} == {p: [(e, 0)] for p, e in led.items()}

    broker.kill()
    broker.restart()
    again = wait_until(
        lambda: _led(broker),
        what=f"{TOPIC} led after the restart",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING + BROKER_UNREACHABLE,
    )
    assert again is not None
    # Read back at the restart (or replaced by the next epoch's entry, also at offset 0).
    assert {p: _epochs(broker, p) for p in again} == {p: [(e, 0)] for p, e in again.items()}

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for partition in range(PARTITIONS):
        producer.produce(TOPIC, value=f"v{partition}".encode(), partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "checkpoints",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        seen: dict[int, bytes | None] = {}

        def all_read() -> bool:
            for message in consumer.consume(100, timeout=0.5):
                partition = message.partition()
                if message.error() is None and partition is not None:
                    seen[partition] = message.value()
            return len(seen) == PARTITIONS

        wait_until(all_read, what="one record back from every partition", timeout=SETTLE_S)
    finally:
        consumer.close()
    assert seen == {p: f"v{p}".encode() for p in range(PARTITIONS)}
    # The records were written in that epoch: it still starts at offset 0.
    assert {p: _epochs(broker, p) for p in again} == {p: [(e, 0)] for p, e in again.items()}
