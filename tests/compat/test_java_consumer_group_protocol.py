"""`kafka-consumer-groups.sh --describe` (kafka-tools 4.1.1) on a KIP-848 consumer group
(two librdkafka members with `group.protocol=consumer`) against Pier and Apache Kafka 4.1.1:
`--state` and `--members` (member ids dropped: each side's client chose its own) must match."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.compat import data
from tests.compat.side_by_side import SideBySide, Target, assert_same, masked_pair, table
from tests.polling import wait_until

pytestmark = [pytest.mark.compat]

GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def members(target: Target, group: str, topic: str) -> list[Consumer]:
    consumers = [
        Consumer(
            {
                "bootstrap.servers": target.bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "enable.auto.commit": False,
            }
        )
        for _ in range(2)
    ]
    for consumer in consumers:
        consumer.subscribe([topic])

    def split() -> bool:
        for consumer in consumers:
            consumer.poll(0.05)
        return [len(c.assignment()) for c in consumers] == [2, 2]

    wait_until(split, what=f"two partitions each on {target.name}", timeout=60, interval=0)
    for consumer in consumers:  # offsets for the describe's columns
        owned = [TopicPartition(tp.topic, tp.partition, 0) for tp in consumer.assignment()]
        consumer.commit(offsets=owned, asynchronous=False)
    return consumers


@pytest.fixture
def group(side_by_side: SideBySide, topic_name: str) -> Iterator[str]:
    name = f"{topic_name}-kip848"
    running: list[Consumer] = []
    try:
        for target in data.targets(side_by_side):
            data.create_topic(target, topic_name, 4)
            running += members(target, name, topic_name)
        yield name
    finally:
        for consumer in running:
            consumer.close()


def test_describe_state_and_members(side_by_side: SideBySide, topic_name: str, group: str) -> None:
    names = {topic_name: "<T>", group: "<G>"}
    pier, kafka = side_by_side.run(
        "tool", GROUPS, "--bootstrap-server", "{bootstrap}", "--describe", "--group", group,
        "--state",
    )  # fmt: skip
    ours, theirs = masked_pair(pier, kafka, names)
    assert (pier.returncode, ours) == (kafka.returncode, theirs), pier.describe() + kafka.describe()
    assert [row[-3:] for row in table(ours)][-1] == ["uniform", "Stable", "2"], ours
    pier, kafka = side_by_side.run(
        "tool", GROUPS, "--bootstrap-server", "{bootstrap}", "--describe", "--group", group,
        "--members",
    )  # fmt: skip
    ours_rows = sorted(row[:1] + row[2:] for row in table(masked_pair(pier, kafka, names)[0]))
    theirs_rows = sorted(row[:1] + row[2:] for row in table(masked_pair(pier, kafka, names)[1]))
    assert pier.returncode == kafka.returncode == 0, pier.describe() + kafka.describe()
    assert ours_rows == theirs_rows, pier.describe() + kafka.describe()
    assert len(ours_rows) == 3, ours_rows  # the header and two members of two partitions each


CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"


def test_java_consumer_joins_reads_commits_and_leaves(
    side_by_side: SideBySide, topic_name: str
) -> None:
    """Kafka's Java consumer 4.1.1 (the console consumer) with `group.protocol=consumer`: joins by
    ConsumerGroupHeartbeat, reads both partitions, commits on close and leaves; the group's
    offsets then read back the same on both sides."""
    group = f"{topic_name}-java848"
    names = {topic_name: "<T>", group: "<G>"}
    for target in data.targets(side_by_side):
        data.create_topic(target, topic_name, 2, config=data.KEEP_RECORDS)
        data.produce(target, topic_name, 2, 5)
    consumed = side_by_side.run(
        "tool", CONSOLE_CONSUMER, "--bootstrap-server", "{bootstrap}", "--topic", topic_name,
        "--group", group, "--consumer-property", "group.protocol=consumer",
        "--from-beginning", "--max-messages", "10", "--timeout-ms", "30000",
        "--property", "print.offset=true", "--property", "print.partition=true",
    )  # fmt: skip
    out = assert_same(*consumed, names, sort_lines=True)
    assert len(out.splitlines()) == 10, out
    offsets = assert_same(
        *side_by_side.run(
            "tool", GROUPS, "--bootstrap-server", "{bootstrap}", "--describe", "--group", group
        ),
        names,
        sort_lines=True,
    )
    rows = {" ".join(line.split()) for line in offsets.splitlines()}
    assert {"<G> <T> 0 5 5 0 - - -", "<G> <T> 1 5 5 0 - - -"} <= rows, offsets
