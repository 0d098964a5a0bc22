"""KIP-848 consumer groups (`group.protocol=consumer`, librdkafka) through the gateway: two of a
tenant's members split its 4-partition topic and read exactly its records, while the other
tenant has a topic and a group of the same names with other records (namespacing of the group
id and the subscribed topic names, topic ids of the assignment resolved to the tenant's topic)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient

from tests.e2e.kafka_admin import create_topic
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
WAIT_S = 60.0
TOPIC, GROUP = "kip848-shared-name", "kip848-shared-group"


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    root = Path(tmp_path_factory.mktemp("gateway-kip848"))
    with GatewayStack(root, broker_config={"group.initial.rebalance.delay.ms": "0"}) as stack:
        yield stack


def produce(config: dict[str, Any], values: list[bytes]) -> None:
    producer = Producer({**config, "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(TOPIC, value=value, partition=i % 4)
    assert producer.flush(WAIT_S) == 0


def describe(config: dict[str, Any], owned: list[set[tuple[str, int]]]) -> None:
    """ConsumerGroupDescribe through the gateway: the tenant's names, its two members only."""
    admin = AdminClient(config)
    [future] = admin.describe_consumer_groups([GROUP]).values()
    described = future.result(timeout=WAIT_S)
    assert described.group_id == GROUP
    assert described.type == ConsumerGroupType.CONSUMER
    members = [
        {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
        for m in described.members
    ]
    assert sorted(members, key=sorted) == sorted(owned, key=sorted), "not bolt's member"


def test_tenant_members_split_and_read_only_their_topic(gateway_stack: GatewayStack) -> None:
    acme = gateway_stack.client_config("acme", "PLAIN")
    bolt = gateway_stack.client_config("bolt", "PLAIN")
    for config in (acme, bolt):
        create_topic(gateway_stack.bootstrap, TOPIC, 4, security=config)
    produce(bolt, [b"bolt-%d" % i for i in range(8)])
    bolt_member = Consumer({**bolt, "group.id": GROUP, "group.protocol": "consumer"})
    bolt_member.subscribe([TOPIC])
    consumers = [
        Consumer(
            {
                **acme,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        for _ in range(2)
    ]
    seen: list[bytes] = []
    try:
        for consumer in consumers:
            consumer.subscribe([TOPIC])

        def step(done: Any) -> bool:
            bolt_member.poll(0.01)
            for consumer in consumers:
                message = consumer.poll(0.05)
                if message is not None and message.error() is None:
                    seen.append(message.value() or b"")
            return bool(done())

        wait_until(
            lambda: step(lambda: [len(c.assignment()) for c in consumers] == [2, 2]),
            what="acme's two members own two partitions each",
            timeout=WAIT_S,
            interval=0,
        )
        owned = [{(tp.topic, tp.partition) for tp in c.assignment()} for c in consumers]
        assert not owned[0] & owned[1]
        assert owned[0] | owned[1] == {(TOPIC, p) for p in range(4)}
        describe(acme, owned)
        produce(acme, [b"acme-%d" % i for i in range(8)])
        wait_until(lambda: step(lambda: len(seen) >= 8), what="acme's 8 records", timeout=WAIT_S,
                   interval=0)  # fmt: skip
        assert sorted(seen) == sorted(b"acme-%d" % i for i in range(8))
    finally:
        for consumer in [*consumers, bolt_member]:
            consumer.close()
