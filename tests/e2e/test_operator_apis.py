"""Operator APIs through real clients: DescribeProducers (kafka-python's admin client), ListOffsets
with leader epochs (confluent-kafka's admin client), and a transactional producer that finds its
transaction coordinator with a handful of FindCoordinator lookups (the broker's request counter
shows how many it sent) and commits."""

from __future__ import annotations

import time
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]
from kafka import KafkaAdminClient
from kafka.structs import TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from infra.stack import BrokerProcess, free_port
from tests.conftest import BrokerFactory
from tests.e2e.kafka_admin import create_topic
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e]

RECORDS = 10
INIT_TIMEOUT_S = 30.0
MAX_LOOKUPS = 10  # a spinning client sends thousands within the init timeout


def produce_idempotently(bootstrap: str, topic: str, timestamps: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for seq, timestamp in enumerate(timestamps):
        producer.produce(topic, value=b"%d" % seq, partition=0, timestamp=timestamp)
    assert producer.flush(30) == 0


def test_kafka_python_describes_the_active_producers(
    module_broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(module_broker.bootstrap, topic_name, 2)
    before = int(time.time() * 1000)
    produce_idempotently(module_broker.bootstrap, topic_name, [0] * RECORDS)  # 0: now
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        states = admin.describe_producers(
            [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
        )
    finally:
        admin.close()
    (producer,) = states[TopicPartition(topic_name, 0)].active_producers
    assert producer.producer_id >= 0 and producer.producer_epoch == 0
    assert producer.last_sequence == RECORDS - 1
    assert before <= producer.last_timestamp <= int(time.time() * 1000)
    assert (producer.coordinator_epoch, producer.current_transaction_start_offset) == (-1, -1)
    assert states[TopicPartition(topic_name, 1)].active_producers == []


def test_confluent_list_offsets_carry_leader_epochs(
    module_broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(module_broker.bootstrap, topic_name, 1)
    base = int(time.time() * 1000) - 60_000
    produce_idempotently(module_broker.bootstrap, topic_name, [base + i for i in range(RECORDS)])
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    tp = CkTopicPartition(topic_name, 0)
    # (getattr: the client's stubs leave these class methods untyped)
    specs = {name: getattr(OffsetSpec, name)() for name in ("earliest", "latest", "max_timestamp")}
    specs["at"] = OffsetSpec.for_timestamp(base + 4)
    found = {}
    for name, spec in specs.items():
        info = admin.list_offsets({tp: spec}, request_timeout=10)[tp].result(timeout=30)
        found[name] = (info.offset, info.timestamp, info.leader_epoch)
    # One standalone broker leads in epoch 0; -1 / None would mean "no epoch reported".
    assert found == {
        "earliest": (0, -1, 0),
        "latest": (RECORDS, -1, 0),
        "max_timestamp": (RECORDS - 1, base + RECORDS - 1, 0),
        "at": (4, base + 4, 0),
    }


def find_coordinator_requests(broker: BrokerProcess) -> float:
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "kafka_network_requests_total"
        and sample.labels.get("request") == "FindCoordinator"
    )


def test_transactional_producer_initializes_without_spinning_and_commits(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(metrics_port=free_port())
    create_topic(broker.bootstrap, "txn-out", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-e2e"})
    started = time.monotonic()
    producer.init_transactions(INIT_TIMEOUT_S)
    elapsed = time.monotonic() - started
    lookups = find_coordinator_requests(broker)
    assert 1 <= lookups <= MAX_LOOKUPS, f"{lookups} FindCoordinator requests in {elapsed:.2f} s"
    producer.begin_transaction()
    producer.produce("txn-out", b"committed", partition=0)
    producer.commit_transaction(INIT_TIMEOUT_S)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = CkTopicPartition("txn-out", 0)

    def latest() -> int:
        spec = {tp: OffsetSpec.latest()}  # type: ignore[no-untyped-call]
        return int(admin.list_offsets(spec, request_timeout=10)[tp].result(30).offset)

    # The COMMIT marker is written after EndTxn is answered: the record, then the marker.
    wait_until(lambda: latest() == 2, what="the record and its COMMIT marker", timeout=30)
