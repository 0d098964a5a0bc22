"""`kafka-console-producer.sh` / `kafka-console-consumer.sh` (org.apache.kafka.tools.ConsoleProducer,
...consumer.ConsoleConsumer) and `kafka-verifiable-producer.sh` / `kafka-verifiable-consumer.sh`
(VerifiableProducer, VerifiableConsumer), kafka-tools 4.1.1, against Pier and against Apache Kafka
4.1.1: keyed records with headers written with every codec, read back with keys, headers, offsets
and partitions printed; the verifiable tools' JSON event streams. Outputs must match after masking
timestamps (and the producer's measured throughput)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.compat import data
from tests.compat.side_by_side import Ran, SideBySide, assert_same, mask

pytestmark = [pytest.mark.compat]

PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# parse.headers: "headers TAB key TAB value"; an empty header value is kept
LINES = "h1:v1,h2:v2\tk1\t{codec}-1\nh3:\tk2\t{codec}-2\n"


def test_console_producer_and_consumer_every_codec(
    side_by_side: SideBySide, topic_name: str
) -> None:
    names = {topic_name: "<T>"}
    for target in data.targets(side_by_side):
        data.create_topic(target, topic_name, 1)
    for codec in CODECS:
        produced = side_by_side.run(
            "tool", PRODUCER, "--bootstrap-server", "{bootstrap}", "--topic", topic_name,
            "--compression-codec", codec, "--property", "parse.key=true",
            "--property", "parse.headers=true",
            stdin=LINES.format(codec=codec),
        )  # fmt: skip
        assert_same(*produced, names)
    consumed = side_by_side.run(
        "tool", CONSUMER, "--bootstrap-server", "{bootstrap}", "--topic", topic_name,
        "--from-beginning", "--max-messages", str(2 * len(CODECS)), "--timeout-ms", "30000",
        "--property", "print.key=true", "--property", "print.headers=true",
        "--property", "print.offset=true", "--property", "print.partition=true",
    )  # fmt: skip
    out = assert_same(*consumed, names)
    assert out.splitlines() == [
        line
        for i, codec in enumerate(CODECS)
        for line in (
            f"Partition:0\tOffset:{2 * i}\th1:v1,h2:v2\tk1\t{codec}-1",
            f"Partition:0\tOffset:{2 * i + 1}\th3:\tk2\t{codec}-2",
        )
    ]


def events(ran: Ran) -> list[dict[str, Any]]:
    """The tool's JSON events, masked, without measured throughput."""
    found = []
    for line in mask(ran.stdout, ran.target).splitlines():
        if line.startswith("{"):
            event = json.loads(line.replace("<millis>", "0"))
            event.pop("avg_throughput", None)
            found.append(event)
    return found


def test_verifiable_producer_and_consumer(side_by_side: SideBySide, topic_name: str) -> None:
    for target in data.targets(
        side_by_side
    ):  # one partition: the sticky partitioner picks at random
        data.create_topic(target, topic_name, 1)
    produced = side_by_side.run(
        "tool", VERIFIABLE_PRODUCER, "--bootstrap-server", "{bootstrap}", "--topic", topic_name,
        "--max-messages", "20", "--acks", "-1",
    )  # fmt: skip
    ours, theirs = (events(ran) for ran in produced)
    assert ours == theirs, f"{produced[0].describe()}\n{produced[1].describe()}"
    assert ours[-1]["name"] == "tool_data" and (ours[-1]["sent"], ours[-1]["acked"]) == (20, 20)
    consumed = side_by_side.run(
        "tool", VERIFIABLE_CONSUMER, "--bootstrap-server", "{bootstrap}", "--topic", topic_name,
        "--group-id", f"{topic_name}-group", "--max-messages", "20", "--reset-policy", "earliest",
    )  # fmt: skip
    ours, theirs = (events(ran) for ran in consumed)
    assert ours == theirs, f"{consumed[0].describe()}\n{consumed[1].describe()}"
    counted = sum(e["count"] for e in ours if e["name"] == "records_consumed")
    assert counted == 20
    assert any(e["name"] == "offsets_committed" and e["success"] for e in ours)
