"""Attacks on the tenant boundary through KIP-848 regex subscriptions (SubscribedTopicRegex, which
the brokers evaluate): tenant `acme` subscribes with regexes meant to reach tenant `bolt`'s topics
or the fleet's internal ones (`.*`, `(?i).*`, `a)|(.*` to close the gateway's group early, an
unterminated `\\Q`, an alternation naming `bolt_`, a very long one), while bolt has topics of the
same and other names holding records marked BOLTSECRET. Each regex is checked where it lands: on
the broker, the group's target assignment (read by a direct ConsumerGroupDescribe, fleet names)
holds only `acme_` topics; refused ones get INVALID_REGULAR_EXPRESSION (128). A librdkafka
consumer (`group.protocol=consumer`, `subscribe(["^.*"])`) reads acme's records and none of
bolt's, and Describe through the gateway shows acme its own regex. One stack for the module.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_describe.v0.response import ConsumerGroupDescribeResponse
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse

from brokers.wire.errors import ErrorCode
from tests.e2e.gateway.sasl_wire import login
from tests.e2e.kafka_admin import create_topic
from tests.e2e.raw_wire import RawConnection
from tests.e2e.request_fuzz import plain_entity
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
TIMEOUT_S = 60.0
SECRET = b"BOLTSECRET"
ACME_TOPICS = {"rx-orders": 2, "audit": 1}
BOLT_TOPICS = {"rx-orders": 2, "rx-bolt-only": 1, "acme_rx": 1}


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    root = Path(tmp_path_factory.mktemp("gateway-regex"))
    config = {
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.regex.refresh.interval.ms": "1000",
    }
    with GatewayStack(root, broker_config=config) as stack:
        for tenant, topics in (("acme", ACME_TOPICS), ("bolt", BOLT_TOPICS)):
            security = stack.client_config(tenant)
            for name, partitions in topics.items():
                create_topic(stack.bootstrap, name, partitions, security=security)
        produce(stack, "bolt", [(t, SECRET + t.encode()) for t in BOLT_TOPICS])
        produce(stack, "acme", [(t, b"acme-" + t.encode()) for t in ACME_TOPICS])
        yield stack


def produce(stack: GatewayStack, tenant: str, records: list[tuple[str, bytes]]) -> None:
    producer = Producer(stack.client_config(tenant, acks="all"))
    for topic, value in records:
        producer.produce(topic, value)
    assert producer.flush(TIMEOUT_S) == 0


def build(cls: Any, **fields: Any) -> Any:
    return dataclasses.replace(plain_entity(cls), **fields)


def join(stack: GatewayStack, group: str, regex: str) -> Any:
    request = build(
        ConsumerGroupHeartbeatRequest,
        group_id=group,
        member_id=uuid.uuid4().hex,
        member_epoch=0,
        subscribed_topic_names=None,
        subscribed_topic_regex=regex,
        server_assignor=None,
        topic_partitions=(),
        instance_id=None,
        rack_id=None,
    )
    with login(stack, "acme") as connection:
        return connection.call(request, ConsumerGroupHeartbeatResponse, timeout=TIMEOUT_S)


def fleet_target(stack: GatewayStack, group: str) -> tuple[str | None, set[str]]:
    """The broker's own view of acme's group: the member's regex and its target's topics."""
    assert stack.broker is not None
    host, port = stack.broker.bootstrap.rsplit(":", 1)
    connection = RawConnection(host, int(port))
    try:
        request = build(ConsumerGroupDescribeRequest, group_ids=(f"acme_{group}",),
                        include_authorized_operations=False)  # fmt: skip
        response = connection.call(request, ConsumerGroupDescribeResponse, timeout=TIMEOUT_S)
    finally:
        connection.close()
    [described] = response.groups
    assert described.error_code == ErrorCode.none
    [member] = described.members
    topics = {t.topic_name for t in member.target_assignment.topic_partitions}
    return member.subscribed_topic_regex, topics


ALL = frozenset(ACME_TOPICS)


@pytest.mark.parametrize(
    ("regex", "expected"),
    [(".*", ALL), ("(?i).*", ALL), ("(?i)BOLT_.*", set()), (".*|bolt_.*", ALL),
     ("(^rx-.*)|(^bolt_.*)", {"rx-orders"}), (r"\Qrx-orders", {"rx-orders"}),
     ("rx-orders|(?s:.*)", ALL), ("[^_]*_?.*", ALL), ("(^.*)", ALL), ("(?i).*acme_rx", set()),
     (r"\Qbolt_rx-orders\E", set())],
)  # fmt: skip
def test_attack_regex_assigns_only_acmes_topics(
    gateway_stack: GatewayStack, regex: str, expected: set[str]
) -> None:
    group = f"rx-{uuid.uuid4().hex[:8]}"
    answer = join(gateway_stack, group, regex)
    assert answer.error_code == ErrorCode.none, answer.error_message
    sent, topics = fleet_target(gateway_stack, group)
    assert sent is not None and sent.startswith("acme_(?:")
    assert topics == {f"acme_{t}" for t in expected}


@pytest.mark.parametrize(
    "regex", ["a)|(.*", ")|.*|(", "(?<=bolt_).*", "\\", "x" * 1100, "(" * 600 + ")" * 600]
)
def test_attack_invalid_or_long_regex_is_refused(gateway_stack: GatewayStack, regex: str) -> None:
    answer = join(gateway_stack, f"rx-{uuid.uuid4().hex[:8]}", regex)
    assert answer.error_code == ErrorCode.invalid_regular_expression
    assert answer.member_epoch == 0


def test_attack_librdkafka_regex_reads_only_acmes_records(gateway_stack: GatewayStack) -> None:
    group = f"rx-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        gateway_stack.client_config(
            "acme",
            **{"group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest"},
        )
    )
    values: list[bytes] = []
    assigned: set[str] = set()
    try:
        consumer.subscribe(["^.*"])

        def acme_records_read() -> bool:
            message = consumer.poll(0.2)
            assigned.update(tp.topic for tp in consumer.assignment())
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
            return len(values) >= len(ACME_TOPICS)

        wait_until(acme_records_read, what="acme's records", timeout=TIMEOUT_S, interval=0)
        sent, topics = fleet_target(gateway_stack, group)
        assert sent == "acme_(?:((?-U:).*))"  # librdkafka sends `(^.*)`
        assert topics == {f"acme_{t}" for t in ACME_TOPICS}
        with login(gateway_stack, "acme") as connection:
            request = build(ConsumerGroupDescribeRequest, group_ids=(group,),
                            include_authorized_operations=False)  # fmt: skip
            described = connection.call(request, ConsumerGroupDescribeResponse, TIMEOUT_S)
        [member] = described.groups[0].members
        assert member.subscribed_topic_regex == "(^.*)"
    finally:
        consumer.close()
    assert assigned == set(ACME_TOPICS)
    assert sorted(values) == sorted(b"acme-" + t.encode() for t in ACME_TOPICS)
    assert not [v for v in values if SECRET in v]
