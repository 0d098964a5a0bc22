"""Large Fetch answers stream through the gateway (`gateway.kafka.raw.fetch_stream`): answers of
64 KiB and more go to the client as the broker's bytes arrive, the topic renamed in the streamed
head. Real clients with different Fetch versions (librdkafka v12 with tagged fields and fetch
sessions, kafka-python's older classic versions) read megabytes of records back exactly, in
order, per partition."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka.structs import TopicPartition as KpTopicPartition

from tests.e2e.gateway.clients import security_settings
from tests.e2e.kafka_admin import create_topic
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

PARTITIONS = 2
RECORDS = 3_000  # per partition, 1 KiB each: answers of up to megabytes
TIMEOUT_S = 60.0


def value(partition: int, index: int) -> bytes:
    head = f"{partition}:{index}:".encode()
    return head + bytes((index + k) % 251 for k in range(1024 - len(head)))


@pytest.fixture(scope="module")
def streamed_topic(gateway_stack: GatewayStack) -> str:
    name = "streamed-answers"
    security = security_settings("confluent-kafka", gateway_stack.credentials["acme"], "PLAIN")
    create_topic(gateway_stack.bootstrap, name, PARTITIONS, security=security)
    producer = Producer(
        gateway_stack.client_config("acme", "PLAIN", acks="all", **{"linger.ms": 20})
    )
    for index in range(RECORDS):
        for partition in range(PARTITIONS):
            producer.produce(name, value(partition, index), partition=partition)
        producer.poll(0)
    assert producer.flush(60) == 0
    return name


def expected() -> dict[int, list[bytes]]:
    return {p: [value(p, i) for i in range(RECORDS)] for p in range(PARTITIONS)}


def test_librdkafka_reads_megabytes_of_streamed_answers_exactly(
    gateway_stack: GatewayStack, streamed_topic: str
) -> None:
    consumer = Consumer(
        gateway_stack.client_config(
            "acme",
            "PLAIN",
            **{"group.id": "streaming", "enable.auto.commit": False, "fetch.max.bytes": 8 << 20},
        )
    )
    seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([TopicPartition(streamed_topic, p, 0) for p in range(PARTITIONS)])

        def consumed() -> bool:
            for message in consumer.consume(num_messages=2_000, timeout=0.5):
                assert message.error() is None, message.error()
                partition, record = message.partition(), message.value()
                assert partition is not None and record is not None
                seen[partition].append(record)
            return sum(len(v) for v in seen.values()) >= RECORDS * PARTITIONS

        wait_until(consumed, what="every record through the gateway", timeout=TIMEOUT_S)
    finally:
        consumer.close()
    assert seen == expected()


def test_kafka_python_reads_megabytes_of_streamed_answers_exactly(
    gateway_stack: GatewayStack, streamed_topic: str
) -> None:
    security = security_settings("kafka-python", gateway_stack.credentials["acme"], "PLAIN")
    consumer = KafkaConsumer(
        bootstrap_servers=gateway_stack.bootstrap,
        enable_auto_commit=False,
        fetch_max_bytes=8 << 20,
        max_partition_fetch_bytes=4 << 20,
        **security,
    )
    seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        partitions = [KpTopicPartition(streamed_topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)

        def consumed() -> bool:
            for tp, batch in consumer.poll(timeout_ms=500, max_records=5_000).items():
                seen[tp.partition].extend(r.value for r in batch)
            return sum(len(v) for v in seen.values()) >= RECORDS * PARTITIONS

        wait_until(consumed, what="every record through the gateway", timeout=TIMEOUT_S)
    finally:
        consumer.close()
    assert seen == expected()
