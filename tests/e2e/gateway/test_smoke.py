"""The gateway's first path: a tenant produces and consumes through it with SASL/PLAIN."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer

from tests.gateway_stack import GatewayStack

pytestmark = pytest.mark.e2e


def test_produce_and_consume_through_the_gateway(
    gateway_stack: GatewayStack, topic_name: str
) -> None:
    producer = Producer(gateway_stack.client_config("acme", "PLAIN", acks="all"))
    for i in range(100):
        producer.produce(topic_name, f"value-{i}".encode(), f"key-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        gateway_stack.client_config(
            "acme", "PLAIN", **{"group.id": "g1", "auto.offset.reset": "earliest"}
        )
    )
    consumer.subscribe([topic_name])
    seen = []
    try:
        while len(seen) < 100:
            message = consumer.poll(10)
            assert message is not None, f"only {len(seen)} of 100 records arrived"
            assert message.error() is None, message.error()
            seen.append(message.value())
    finally:
        consumer.close()
    assert seen == [f"value-{i}".encode() for i in range(100)]
