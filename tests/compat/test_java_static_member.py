"""A static member of a KIP-848 group (Kafka's Java consumer 4.1.1, `group.protocol=consumer`,
`group.instance.id`) restarts without a rebalance: against a real in-process Pier broker, the
Java consumer (`tests/compat/java/GroupConsumer.java`) shares a 4-partition topic with a dynamic
librdkafka member, reads its half, commits and closes (its leave carries epoch -2); the group keeps
its epoch, its member (epoch -2) and its partitions, the librdkafka member is not given them; a
second Java process with the same instance id (a new member id) gets the same partitions at once,
reads only the records produced since, and the group epoch is still the same."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.types import GroupId

from brokers.app.runtime import Broker
from tests.compat.conftest import ReferenceKafka
from tests.integration.inproc import broker_thread, raw_call
from tests.integration.test_groups_clients import bootstrap_of, create_topic, produce
from tests.polling import wait_until

pytestmark = [pytest.mark.compat]
CONSUMER = str(Path(__file__).parent / "java" / "GroupConsumer.java")
TOPIC, PARTITIONS, PER_ROUND = "static-848", 4, 16
GROUP = "g-static-848"
TIMEOUT_S = 60.0
PROPERTIES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "45000",  # the static member's time to come back
}


class Dynamic:
    """A librdkafka member polled on a thread; `changes` is each assignment it was given."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe([TOPIC])
        self.changes: list[list[int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.1)
            now = sorted(tp.partition for tp in self.consumer.assignment())
            if not self.changes or self.changes[-1] != now:
                self.changes.append(now)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT_S)
        self.consumer.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with broker_thread(tmp_path, PROPERTIES) as running:
        yield running


def described(bootstrap: str) -> tuple[int, dict[str, tuple[int, list[int]]]]:
    request = ConsumerGroupDescribeRequest(
        group_ids=(GroupId(GROUP),), include_authorized_operations=False
    )
    [group] = raw_call(bootstrap, request).groups
    members = {
        m.instance_id or "dynamic": (
            int(m.member_epoch),
            sorted(p for t in m.assignment.topic_partitions for p in t.partitions),
        )
        for m in group.members
    }
    return int(group.group_epoch), members


def run_java(reference: ReferenceKafka, properties: Path) -> tuple[list[int], list[list[str]]]:
    """The Java member reads its partitions' PER_ROUND / 2 new records; its assignment, records."""
    ran = reference.run(
        CONSUMER, str(properties), GROUP, "consumer", f"topics:{TOPIC}", str(PER_ROUND // 2),
        "20000",
    )  # fmt: skip
    assert ran.returncode == 0, f"{ran.stdout[-2000:]}\n{ran.stderr[-3000:]}"
    lines = ran.stdout.splitlines()
    assigned = [
        line.split()[1] for line in lines if len(line.split()) == 2 and line.startswith("ASSIGNED")
    ]
    partitions = sorted(int(tp.rsplit("-", 1)[1]) for tp in assigned[-1].split(","))
    return partitions, [line.split() for line in lines if line.startswith("RECORD ")]


def test_a_static_java_member_restarts_with_its_partitions_and_no_rebalance(
    broker: Broker, reference_kafka: ReferenceKafka, tmp_path: Path
) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, TOPIC, PARTITIONS)
    produce(bootstrap, TOPIC, PER_ROUND, PARTITIONS)
    properties = tmp_path / "static.properties"
    properties.write_text(f"bootstrap.servers={bootstrap}\ngroup.instance.id=java-1\n")
    dynamic = Dynamic(bootstrap)
    try:
        wait_until(
            lambda: dynamic.changes[-1:] == [list(range(PARTITIONS))],
            what="the dynamic member assigned every partition",
            timeout=TIMEOUT_S,
        )
        first, records = run_java(reference_kafka, properties)
        assert len(first) == PARTITIONS // 2 and {int(r[2]) for r in records} == set(first)
        epoch, members = described(bootstrap)
        assert members["java-1"] == (-2, first)  # away, its partitions kept
        kept = [p for p in range(PARTITIONS) if p not in first]
        wait_until(
            lambda: dynamic.changes[-1] == kept,
            what=f"the dynamic member settled on {kept}",
            timeout=TIMEOUT_S,
        )
        settled = len(dynamic.changes)

        produce(bootstrap, TOPIC, PER_ROUND, PARTITIONS, start=PER_ROUND)
        second, records = run_java(reference_kafka, properties)  # a new process, a new member id
        assert second == first
        assert sorted(int(r[3]) for r in records) == [4, 4, 5, 5, 6, 6, 7, 7]  # the new ones only
        assert described(bootstrap) == (epoch, {"java-1": (-2, first), "dynamic": (epoch, kept)})
        assert len(dynamic.changes) == settled  # nothing moved to or from the dynamic member
    finally:
        dynamic.close()
