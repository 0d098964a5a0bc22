"""Kafka 4.1.1's own `DumpLogSegments --offsets-decoder` reads the KIP-848 records Pier writes to
`__consumer_offsets` (`brokers/coordinator/consumer_group_records.py`): a librdkafka member with
`group.protocol=consumer` joins a real in-process Pier broker, commits, is joined by a classic
librdkafka member (a mixed group) and leaves after it; every record of the offsets segment decodes
with Kafka's schemas into the values we meant (group epoch, subscribed topic metadata, member
metadata, the classic member's ClassicMemberMetadata, target assignment, current assignment), and
the leave is the member's three tombstones followed by the bumped group epoch, in Kafka's order."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from brokers.coordinator.consumer_group_migration import decode_subscription
from infra import reference_kafka as rk
from tests.compat.side_by_side import REFERENCE
from tests.integration.inproc import broker_thread
from tests.integration.test_groups_clients import (
    SESSION_MS,
    assigned,
    bootstrap_of,
    confluent_consumer,
    consume_until,
    create_topic,
    produce,
)
from tests.polling import wait_until

pytestmark = [pytest.mark.compat]
TOPIC, GROUP = "records-848", "g-records-848"
DUMP = "kafka.tools.DumpLogSegments"
PROPERTIES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
    "group.consumer.heartbeat.interval.ms": "300",
}


def consume_commit_leave(bootstrap: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        read: list[Any] = []

        def all_read() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                read.append(message)
                consumer.commit(message=message, asynchronous=False)
            return len(read) == 4

        wait_until(all_read, what="4 records read and committed", timeout=60, interval=0)
        classic = confluent_consumer(bootstrap, GROUP)  # group.protocol=classic: a mixed group
        try:
            classic.subscribe([TOPIC])
            both = [consumer, classic]
            consume_until(both, lambda: all(assigned(c) for c in both), what="a split")
        finally:
            classic.close()  # LeaveGroup of the classic member
        consume_until([consumer], lambda: len(assigned(consumer)) == 2, what="both partitions")
    finally:
        consumer.close()  # the leave: epoch -1


def records(segment: Path) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """(key, value) of every record Kafka's tool decoded; value None for a tombstone."""
    ran = subprocess.run(
        [str(REFERENCE), "server-tool", DUMP, "--offsets-decoder", "--files", str(segment)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PIER_KAFKA_JAVA_OPTS": "-XX:TieredStopAtLevel=1"},
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    out = []
    for line in ran.stdout.splitlines():
        if not line.startswith("| offset:"):
            continue
        key, payload = line.split(" key: ", 1)[1].split(" payload: ", 1)
        out.append((json.loads(key), None if payload == "<DELETE>" else json.loads(payload)))
    return out


def test_kafkas_dump_tool_decodes_our_consumer_group_records(tmp_path: Path) -> None:
    rk.fetch_server()
    with broker_thread(tmp_path, PROPERTIES) as broker:
        bootstrap = bootstrap_of(broker)
        create_topic(bootstrap, TOPIC, 2)
        produce(bootstrap, TOPIC, 4, 2)
        consume_commit_leave(bootstrap)
    decoded = records(tmp_path / "data" / "__consumer_offsets-0" / "00000000000000000000.log")
    ours = [(int(k["type"]), k["data"], v) for k, v in decoded if int(k["type"]) >= 3]
    first = {t: (data, value) for t, data, value in ours[:6]}
    assert sorted(first) == [3, 4, 5, 6, 7, 8]  # the join: one batch of the six record types
    member = first[5][0]["memberId"]
    assert first[3][1] == {"version": "0", "data": {"epoch": 1}}
    [topic] = first[4][1]["data"]["topics"]  # type: ignore[index]
    assert (topic["topicName"], topic["numPartitions"]) == (TOPIC, 2)
    meta = first[5][1]["data"]  # type: ignore[index]
    assert (meta["subscribedTopicNames"], meta["clientHost"]) == ([TOPIC], "/127.0.0.1")
    assert first[6][1] == {"version": "0", "data": {"assignmentEpoch": 1}}
    target = first[7][1]["data"]["topicPartitions"]  # type: ignore[index]
    assert target == [{"topicId": topic["topicId"], "partitions": [0, 1]}]
    current = first[8][1]["data"]  # type: ignore[index]
    assert (current["memberEpoch"], current["state"]) == (1, 0)
    assert current["assignedPartitions"] == target and current["partitionsPendingRevocation"] == []
    classic = [
        value["data"]
        for t, data, value in ours
        if t == 5 and value is not None and value["data"].get("classicMemberMetadata")
    ]
    assert classic, "the classic member's metadata record"
    tagged = classic[0]["classicMemberMetadata"]
    assert tagged["sessionTimeoutMs"] == SESSION_MS
    protocols = tagged["supportedProtocols"]
    assert [p["name"] for p in protocols] == ["range", "roundrobin"]  # librdkafka's default
    assert decode_subscription(base64.b64decode(protocols[0]["metadata"])).topics == {TOPIC}
    assert meta.get("classicMemberMetadata") is None  # a consumer-protocol member has none
    leave = [(t, data.get("memberId"), value) for t, data, value in ours[-4:]]
    assert leave == [
        (8, member, None),
        (7, member, None),
        (5, member, None),
        (3, None, {"version": "0", "data": {"epoch": 4}}),  # joins 1, 2; leaves 3, 4
    ]
