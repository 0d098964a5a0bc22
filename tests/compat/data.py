"""Test data put on both systems with confluent-kafka (faster than a tool JVM per step): topics,
records with fixed timestamps, and committed group offsets. Blocking; helpers for one test at a time.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.compat.side_by_side import SideBySide, Target
from tests.polling import wait_until

BASE_TIMESTAMP_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def targets(pair: SideBySide) -> tuple[Target, Target]:
    return pair.pier, pair.kafka


# `produce` stamps records years in the past: without this, time retention deletes them whenever
# the server's retention pass happens to run (Kafka's first runs 30 s after start, then every
# 5 min, rolling an expired active segment too), and the two servers answer differently.
KEEP_RECORDS = {"retention.ms": "-1"}


def create_topic(
    target: Target,
    topic: str,
    partitions: int,
    replicas: int = 1,
    config: Mapping[str, str] | None = None,
) -> None:
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    new = NewTopic(topic, partitions, replicas, config=dict(config or {}))
    admin.create_topics([new])[topic].result(timeout=60)
    wait_until(
        lambda: (
            len(admin.list_topics(topic, timeout=5).topics[topic].partitions) == partitions
            and all(
                p.leader >= 0
                for p in admin.list_topics(topic, timeout=5).topics[topic].partitions.values()
            )
        ),
        what=f"{topic} led on {target.name}",
        retry_on=(KafkaException,),
    )


def produce(target: Target, topic: str, partitions: int, per_partition: int) -> None:
    """`per_partition` records to each partition, record i of a partition at BASE + i seconds."""
    producer = Producer({"bootstrap.servers": target.bootstrap, "acks": "all", "linger.ms": 5})
    for partition in range(partitions):
        for i in range(per_partition):
            producer.produce(
                topic,
                key=b"k%d" % i,
                value=b"v%d-%d" % (partition, i),
                partition=partition,
                timestamp=BASE_TIMESTAMP_MS + i * 1000,
            )
    assert producer.flush(30) == 0


def commit(target: Target, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """Commit `offsets` for `group` (retried while the coordinator is still being found/loaded)."""
    consumer = Consumer(
        {"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    wanted = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
    try:
        wait_until(
            lambda: consumer.commit(offsets=wanted, asynchronous=False) is not None,
            what=f"commit of {group} on {target.name}",
            retry_on=(KafkaException,),
        )
    finally:
        consumer.close()
