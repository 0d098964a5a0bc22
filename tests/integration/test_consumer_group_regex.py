"""KIP-848 regex subscriptions evaluated on a real in-process broker, through librdkafka
(confluent-kafka, `group.protocol=consumer`, `subscribe(["^prefix.*"])`): the broker receives the
regex, assigns only matching topics (never an internal one), picks up a topic created later within
the refresh interval (`group.consumer.regex.refresh.interval.ms` = 1 s here) and reports the regex
in ConsumerGroupDescribe."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from brokers.app.runtime import Broker
from tests.integration.inproc import broker_thread
from tests.integration.test_consumer_group_protocol import PROPERTIES, WAIT_S, kip848_consumer
from tests.integration.test_groups_clients import (
    assigned,
    bootstrap_of,
    consume_until,
    create_topic,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    properties = {**PROPERTIES, "group.consumer.regex.refresh.interval.ms": "1000"}
    with broker_thread(tmp_path, properties) as running:
        yield running


def test_regex_subscription_follows_matching_topics(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    group_id = "g-kip848-regex"
    create_topic(bootstrap, "rx-a", 2)
    create_topic(bootstrap, "other", 2)
    consumer = kip848_consumer(bootstrap, group_id)
    try:
        consumer.subscribe(["^rx-.*"])
        consume_until([consumer], lambda: assigned(consumer) == {("rx-a", 0), ("rx-a", 1)},
                      what="the one matching topic")  # fmt: skip
        group = broker.groups.coordinator.consumer_groups.groups[group_id]
        [member] = group.members.values()
        assert member.regex == "(^rx-.*)", "librdkafka sent the regex; the broker matched it"
        epoch = group.epoch
        create_topic(bootstrap, "rx-b", 1)
        create_topic(bootstrap, "nope-rx-c", 1)
        want = {("rx-a", 0), ("rx-a", 1), ("rx-b", 0)}
        consume_until([consumer], lambda: assigned(consumer) == want,
                      what="the topic created later, within the refresh interval")  # fmt: skip
        assert group.epoch > epoch, "the changed match bumped the group epoch"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        [future] = admin.describe_consumer_groups([group_id]).values()
        [described] = future.result(timeout=WAIT_S).members
        topics = {tp.topic for tp in described.assignment.topic_partitions}
        assert topics == {"rx-a", "rx-b"}
    finally:
        consumer.close()
