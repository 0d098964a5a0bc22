"""Mixed KIP-848 groups against a real in-process broker through librdkafka: two classic members
(`group.protocol=classic`) share a topic and commit; a `group.protocol=consumer` member then joins
the same group id, which upgrades the classic group to a consumer group whose classic members
keep being served (JoinGroup/SyncGroup/Heartbeat with the server-side assignor's assignment);
the partitions end up split over all three, never owned by two at once, and every record is read
once after its commit; when the classic members leave, the consumer member takes everything."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_describe.v1.response import ConsumerGroupDescribeResponse
from kio.schema.types import GroupId

from brokers.app.runtime import Broker
from tests.e2e.raw_wire import RawConnection
from tests.integration.inproc import broker_thread
from tests.integration.test_consumer_group_protocol import PROPERTIES, kip848_consumer
from tests.integration.test_groups_clients import (
    assigned,
    bootstrap_of,
    confluent_consumer,
    consume_until,
    create_topic,
    produce,
)

pytestmark = pytest.mark.integration
TOPIC, GROUP, PARTITIONS = "mixed", "g-mixed", 4


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with broker_thread(tmp_path, PROPERTIES) as running:
        yield running


def member_types(broker: Broker) -> list[int]:
    """ConsumerGroupDescribe v1's member types of the group, from the broker."""
    request = ConsumerGroupDescribeRequest(
        group_ids=(GroupId(GROUP),), include_authorized_operations=False
    )
    with RawConnection("127.0.0.1", broker.port) as connection:
        response = connection.call(request, ConsumerGroupDescribeResponse)
    [described] = response.groups
    return sorted(m.member_type for m in described.members)


class Reader:
    """Records read by each consumer, each committed (synchronously) before it is counted; the
    history (who read which offset of which partition, and when) explains a record read twice."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.history: list[tuple[float, str, int, int, str]] = []

    def __call__(self, consumer: Consumer, message: Any) -> None:
        consumer.commit(message=message, asynchronous=False)
        value = message.value().decode()
        self.seen.append(value)
        member = consumer.memberid() or "?"
        self.history.append(
            (time.monotonic(), member, message.partition(), message.offset(), value)
        )

    def each_once(self, count: int) -> None:
        """Every record of v0..v<count-1> read exactly once; else the reads of the others."""
        twice = {v for v in self.seen if self.seen.count(v) > 1}
        missing = {f"v{i}" for i in range(count)} - set(self.seen)
        reads = [h for h in self.history if h[4] in twice] if twice else self.history[-10:]
        assert not twice and not missing and len(self.seen) == count, (
            f"read twice {sorted(twice)}, missing {sorted(missing)}; reads: {reads}"
        )


def disjoint_and_whole(consumers: list[Consumer]) -> bool:
    owned = [assigned(c) for c in consumers]
    union = set().union(*owned)
    whole = union == {(TOPIC, p) for p in range(PARTITIONS)}
    return whole and sum(len(o) for o in owned) == len(union) and all(owned)


def test_a_consumer_member_upgrades_a_classic_group_and_classic_members_stay(
    broker: Broker,
) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, TOPIC, PARTITIONS)
    reader = Reader()
    classic = [confluent_consumer(bootstrap, GROUP) for _ in range(2)]
    modern: Consumer | None = None
    try:
        for consumer in classic:
            consumer.subscribe([TOPIC])
        consume_until(classic, lambda: disjoint_and_whole(classic), reader,
                      what="two classic members split the topic")  # fmt: skip
        produce(bootstrap, TOPIC, 40, PARTITIONS)
        consume_until(classic, lambda: len(reader.seen) >= 40, reader, what="40 records")
        modern = kip848_consumer(bootstrap, GROUP)
        modern.subscribe([TOPIC])
        everyone = [*classic, modern]
        consume_until(everyone, lambda: disjoint_and_whole(everyone), reader,
                      what="three members of the upgraded group split the topic")  # fmt: skip
        coordinator = broker.groups.coordinator
        group = coordinator.consumer_groups.groups[GROUP]
        assert len(group.classic) == 2 and len(group.members) == 3
        assert member_types(broker) == [0, 0, 1], "two classic members, one consumer member"
        assert not coordinator.groups[GROUP].members, "the classic group keeps offsets only"
        produce(bootstrap, TOPIC, 40, PARTITIONS, start=40)
        consume_until(everyone, lambda: len(reader.seen) >= 80, reader, what="80 records")
        for consumer in classic:
            consumer.close()
        classic = []
        produce(bootstrap, TOPIC, 20, PARTITIONS, start=80)
        consume_until([modern], lambda: len(assigned(modern)) == PARTITIONS, reader,
                      what="the consumer member owns every partition")  # fmt: skip
        consume_until([modern], lambda: len(reader.seen) >= 100, reader, what="100 records")
        reader.each_once(100)
        assert not group.classic
    finally:
        for consumer in [*classic, *([modern] if modern else [])]:
            consumer.close()


def test_the_last_consumer_member_leaving_downgrades_the_group(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, TOPIC, PARTITIONS)
    reader = Reader()
    classic = [confluent_consumer(bootstrap, GROUP) for _ in range(2)]
    modern = kip848_consumer(bootstrap, GROUP)
    closed = False
    try:
        for consumer in classic:
            consumer.subscribe([TOPIC])
        consume_until(classic, lambda: disjoint_and_whole(classic), reader,
                      what="two classic members split the topic")  # fmt: skip
        modern.subscribe([TOPIC])
        everyone = [*classic, modern]
        consume_until(everyone, lambda: disjoint_and_whole(everyone), reader,
                      what="three members of the upgraded group split the topic")  # fmt: skip
        produce(bootstrap, TOPIC, 40, PARTITIONS)
        consume_until(everyone, lambda: len(reader.seen) >= 40, reader, what="40 records")
        modern.close()
        closed = True
        coordinator = broker.groups.coordinator
        consume_until(
            classic,
            lambda: GROUP not in coordinator.consumer_groups.groups and disjoint_and_whole(classic),
            reader,
            what="the downgraded classic group's two members split the topic",
        )
        assert len(coordinator.groups[GROUP].members) == 2
        produce(bootstrap, TOPIC, 40, PARTITIONS, start=40)
        consume_until(classic, lambda: len(reader.seen) >= 80, reader, what="80 records")
        reader.each_once(80)
    finally:
        for consumer in [*classic, *([] if closed else [modern])]:
            consumer.close()
