"""Kafka's Java consumer 4.1.1 with `group.protocol=consumer` and `subscribe(SubscriptionPattern)`
(KIP-848: the regex goes to the broker, RE2/J syntax) through the gateway: tenant acme's regex
`rx-.*` gets acme's two matching topics and reads each of their records once, while tenant bolt
has topics of the same names (and one named `acme_rx-x`) holding other records; the brokers saw
the regex wrapped in acme's namespace. The consumer is `tests/compat/java/GroupConsumer.java`,
run from source on the kafka-tools jars."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from infra.connect_help import java_client_properties
from tests.compat.conftest import ReferenceKafka
from tests.gateway_stack import GatewayStack

pytestmark = [pytest.mark.compat]
CONSUMER = str(Path(__file__).parent / "java" / "GroupConsumer.java")
ACME = {"rx-a": 2, "rx-b": 1, "other": 1}
BOLT = {"rx-a": 2, "rx-b": 1, "acme_rx-x": 1}
PER_TOPIC = 6
TIMEOUT_S = 60.0


def fill(stack: GatewayStack, tenant: str, topics: dict[str, int]) -> None:
    admin = AdminClient(stack.client_config(tenant))
    new = [NewTopic(name, partitions, 1) for name, partitions in topics.items()]
    for future in admin.create_topics(new).values():
        future.result(TIMEOUT_S)
    producer = Producer(stack.client_config(tenant, acks="all"))
    for name, partitions in topics.items():
        for i in range(PER_TOPIC):
            producer.produce(name, f"{tenant}-{name}-{i}".encode(), partition=i % partitions)
    assert producer.flush(TIMEOUT_S) == 0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    config = {
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.heartbeat.interval.ms": "500",
    }
    with GatewayStack(Path(tmp_path_factory.mktemp("regex-java")), broker_config=config) as s:
        fill(s, "acme", ACME)
        fill(s, "bolt", BOLT)
        yield s


def test_java_subscription_pattern_reads_only_the_tenants_matching_topics(
    reference_kafka: ReferenceKafka, stack: GatewayStack, tmp_path: Path
) -> None:
    creds = stack.credentials["acme"]
    config = tmp_path / "client.properties"
    config.write_text(
        java_client_properties(stack.bootstrap, {"key_id": creds.key_id, "secret": creds.secret})
    )
    group = f"rx-java-{uuid.uuid4().hex[:6]}"
    wanted = {f"acme-{t}-{i}" for t in ("rx-a", "rx-b") for i in range(PER_TOPIC)}
    ran = reference_kafka.run(
        CONSUMER, str(config), group, "consumer", "regex:rx-.*", str(len(wanted)), "20000"
    )
    assert ran.returncode == 0, f"{ran.stdout[-2000:]}\n{ran.stderr[-3000:]}"
    records = [line.split() for line in ran.stdout.splitlines() if line.startswith("RECORD ")]
    values = [r[4] for r in records]
    assert sorted(values) == sorted(wanted), ran.stdout
    assert {r[1] for r in records} == {"rx-a", "rx-b"}
    assigned = [line for line in ran.stdout.splitlines() if line.startswith("ASSIGNED ")]
    assert assigned[-1] == "ASSIGNED rx-a-0,rx-a-1,rx-b-0", assigned
