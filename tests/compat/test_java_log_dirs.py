"""Kafka's own `kafka-log-dirs.sh` (org.apache.kafka.tools.LogDirsCommand, kafka-tools 4.1.1)
against a real Pier broker: it reaches the broker through the Java admin client (DescribeCluster,
DescribeLogDirs) and prints, as JSON, each partition's size, which must be the bytes of that
partition's segment files as produced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from infra.stack import BrokerProcess
from tests.compat.conftest import ReferenceKafka
from tests.e2e.kafka_admin import create_topic

pytestmark = [pytest.mark.compat]

LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
RECORDS = 200


def produce(bootstrap: str, topic: str, partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for seq in range(RECORDS):
        producer.produce(topic, value=b"%05d" % seq + b"v" * 100, partition=partition)
    assert producer.flush(30) == 0


def segment_bytes(broker: BrokerProcess, topic: str, partition: int) -> int:
    return sum(f.stat().st_size for f in (broker.data_dir / f"{topic}-{partition}").glob("*.log"))


def describe(reference_kafka: ReferenceKafka, broker: BrokerProcess, topic: str) -> Any:
    ran = reference_kafka.run(
        LOG_DIRS, "--bootstrap-server", broker.bootstrap, "--describe", "--topic-list", topic
    )
    assert ran.returncode == 0, f"LogDirsCommand failed:\n{ran.stdout}\n{ran.stderr}"
    lines = [line for line in ran.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, f"expected one JSON line:\n{ran.stdout}"
    return json.loads(lines[0])


def test_log_dirs_command_reports_the_partition_sizes(
    reference_kafka: ReferenceKafka, module_broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(module_broker.bootstrap, topic_name, 2)
    produce(module_broker.bootstrap, topic_name, 0)
    report = describe(reference_kafka, module_broker, topic_name)
    (broker_entry,) = report["brokers"]
    assert broker_entry["broker"] == module_broker.node_id
    (log_dir,) = broker_entry["logDirs"]
    assert log_dir["error"] is None
    assert Path(log_dir["logDir"]) == module_broker.data_dir.resolve()
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    produced = segment_bytes(module_broker, topic_name, 0)
    assert produced > RECORDS * 100
    assert sizes == {f"{topic_name}-0": produced, f"{topic_name}-1": 0}
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in log_dir["partitions"])
