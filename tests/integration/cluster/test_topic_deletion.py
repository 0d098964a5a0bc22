"""Topic deletion in ZooKeeper mode completes only when every replica deleted its log (three
real brokers): deleted while one replica broker is down, the topic stays queued (and cannot be
re-created) until that broker returns and deletes its stale log; then the name can be created
again and the new topic is empty."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from infra.stack import BrokerProcess
from tests.cluster_probes import SETTLE_S, metadata_of
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
SESSION = {
    "zookeeper.session.timeout.ms": "4000",
    "auto.leader.rebalance.enable": "false",
    "replica.lag.time.max.ms": "2000",
    "log.segment.delete.delay.ms": "0",  # renamed `-delete` dirs go at the next sweep
}
TOPIC = "doomed"
PARTITIONS = 2


def topic_dirs(broker: BrokerProcess) -> list[str]:
    """This broker's directories of the topic, deleted-but-not-yet-removed ones included."""
    return sorted(p.name for p in Path(broker.data_dir).iterdir() if p.name.startswith(f"{TOPIC}-"))


def dirs_are(broker: BrokerProcess, expected: list[str]) -> bool:
    return topic_dirs(broker) == expected


def wait_dirs(broker: BrokerProcess, expected: list[str]) -> None:
    wait_until(
        functools.partial(dirs_are, broker, expected),
        what=f"broker {broker.node_id} holds exactly {expected}",
        timeout=SETTLE_S,
    )


def forgotten(broker: BrokerProcess) -> bool:
    """Neither in this broker's metadata nor in its log dir."""
    return metadata_of(broker).topics.get(TOPIC) is None and not topic_dirs(broker)


def zk_exists(chroot: str, path: str) -> bool:
    client = KazooClient(hosts=chroot)
    client.start(10)
    try:
        return client.exists(path) is not None
    finally:
        client.stop()
        client.close()


def create(admin: AdminClient, replication_factor: int = 3) -> None:
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor)])[TOPIC].result(30)


def produce(bootstrap: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(TOPIC, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def watermarks(bootstrap: str) -> list[tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "deletion-check"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


def test_deletion_waits_for_a_down_replica_and_the_name_is_reusable(
    chroot: str, broker_factory: Any
) -> None:
    brokers = {n: broker_factory(node_id=n, zookeeper=chroot, config=SESSION) for n in (1, 2, 3)}
    wait_until(
        lambda: all(sorted(metadata_of(b).brokers) == [1, 2, 3] for b in brokers.values()),
        what="brokers 1, 2 and 3 registered",
        timeout=SETTLE_S,
    )
    controller = metadata_of(brokers[1]).controller_id
    victim = next(n for n in (3, 2, 1) if n != controller)
    survivor = brokers[controller]
    admin = AdminClient({"bootstrap.servers": survivor.bootstrap})
    create(admin)
    produce(survivor.bootstrap, [b"old-%d" % i for i in range(10)])
    expected = [f"{TOPIC}-{p}" for p in range(PARTITIONS)]
    for broker in brokers.values():
        wait_dirs(broker, expected)

    brokers[victim].kill()
    wait_until(
        lambda: victim not in metadata_of(survivor).brokers,
        what=f"broker {victim} gone from the metadata",
        timeout=SETTLE_S,
    )
    admin.delete_topics([TOPIC])[TOPIC].result(30)

    others = [b for n, b in brokers.items() if n != victim]
    for broker in others:
        wait_until(
            functools.partial(forgotten, broker),
            what=f"{TOPIC} forgotten by broker {broker.node_id}",
            timeout=SETTLE_S,
        )
    # The down replica has not answered: the deletion is still pending, the name still taken.
    assert zk_exists(chroot, f"/admin/delete_topics/{TOPIC}")
    assert zk_exists(chroot, f"/brokers/topics/{TOPIC}")
    with pytest.raises(KafkaException, match="marked for deletion"):
        create(admin, replication_factor=2)  # two brokers are up
    assert topic_dirs(brokers[victim]) == expected

    brokers[victim].restart()
    wait_until(
        lambda: not topic_dirs(brokers[victim]),
        what=f"{TOPIC}'s logs deleted by the returning broker {victim}",
        timeout=SETTLE_S,
    )
    wait_until(
        lambda: not zk_exists(chroot, f"/brokers/topics/{TOPIC}"),
        what=f"/brokers/topics/{TOPIC} deleted",
        timeout=SETTLE_S,
    )
    assert not zk_exists(chroot, f"/admin/delete_topics/{TOPIC}")
    assert not zk_exists(chroot, f"/config/topics/{TOPIC}")

    # The name is free again, and the new topic starts empty (fresh logs on every replica).
    create(admin)
    for broker in brokers.values():
        wait_dirs(broker, expected)
    wait_until(
        lambda: watermarks(survivor.bootstrap) == [(0, 0)] * PARTITIONS,
        what=f"the new {TOPIC} empty",
        timeout=SETTLE_S,
        retry_on=(KafkaException,),  # ListOffsets refused while its leaders are elected
    )
    produce(brokers[victim].bootstrap, [b"new"])
    assert sorted(watermarks(survivor.bootstrap)) == [(0, 0), (0, 1)]
