"""Kafka's own `kafka-transactions.sh describe-producers` (org.apache.kafka.tools.
TransactionsCommand, kafka-tools 4.1.1) against a real Pier broker: the Java admin client finds the
partition leader and sends DescribeProducers; the table it prints must show the idempotent
producer that wrote the partition, with its last sequence and timestamp."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from infra.stack import BrokerProcess
from tests.compat.conftest import ReferenceKafka
from tests.e2e.kafka_admin import create_topic

pytestmark = [pytest.mark.compat]

TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
COLUMNS = [
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
]
RECORDS = 7


def describe_producers(
    reference_kafka: ReferenceKafka, broker: BrokerProcess, topic: str, partition: int
) -> list[dict[str, str]]:
    ran = reference_kafka.run(
        TRANSACTIONS,
        "--bootstrap-server",
        broker.bootstrap,
        "describe-producers",
        "--topic",
        topic,
        "--partition",
        str(partition),
    )
    assert ran.returncode == 0, f"TransactionsCommand failed:\n{ran.stdout}\n{ran.stderr}"
    header, *rows = [line.split() for line in ran.stdout.splitlines() if line.strip()]
    assert header == COLUMNS, ran.stdout
    return [dict(zip(COLUMNS, row, strict=True)) for row in rows]


def test_describe_producers_shows_the_idempotent_producer(
    reference_kafka: ReferenceKafka, module_broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(module_broker.bootstrap, topic_name, 2)
    before = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": module_broker.bootstrap, "enable.idempotence": True})
    for seq in range(RECORDS):
        producer.produce(topic_name, value=b"%d" % seq, partition=0)
    assert producer.flush(30) == 0
    (row,) = describe_producers(reference_kafka, module_broker, topic_name, 0)
    assert int(row["ProducerId"]) >= 0
    assert (row["ProducerEpoch"], row["LatestCoordinatorEpoch"]) == ("0", "-1")
    assert row["LastSequence"] == str(RECORDS - 1)
    assert before <= int(row["LastTimestamp"]) <= int(time.time() * 1000)
    assert row["CurrentTransactionStartOffset"] == "None"
    assert describe_producers(reference_kafka, module_broker, topic_name, 1) == []
