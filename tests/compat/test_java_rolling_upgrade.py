"""A rolling upgrade of Kafka's Java consumers 4.1.1 from `group.protocol=classic` to `consumer`
through the gateway (Kafka 4's online upgrade, `group.consumer.migration.policy=bidirectional`):
two classic consumers share a 4-partition topic; each in turn is stopped (closing: LeaveGroup) and
started again with `group.protocol=consumer`. The first restart upgrades the classic group to a
consumer group whose remaining classic member keeps being served (JoinGroup/SyncGroup/Heartbeat);
records produced in each phase are read, and each record is printed by exactly one consumer once
its offset commit returned (`tests/compat/java/GroupConsumer.java`): none skipped, none twice."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from infra.connect_help import java_client_properties
from tests.compat.conftest import ReferenceKafka
from tests.compat.side_by_side import REFERENCE
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.slow]
CONSUMER = str(Path(__file__).parent / "java" / "GroupConsumer.java")
TOPIC, PARTITIONS, PER_PHASE = "rolling", 4, 40
TIMEOUT_S = 90.0


class JavaConsumer:
    """One GroupConsumer process; its stdout read as it comes."""

    def __init__(self, config: Path, group: str, protocol: str, log: Path) -> None:
        self.protocol = protocol
        self.log = log
        self._log_file = log.open("wb")
        self.process = subprocess.Popen(
            [str(REFERENCE), "tool", CONSUMER, str(config), group, protocol,
             f"topics:{TOPIC}", "1000000", "600000", "stdin"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log_file,
            env={**os.environ, "PIER_KAFKA_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -Xshare:auto"},
        )  # fmt: skip
        assert self.process.stdout is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        self.records: list[str] = []
        self.assigned = ""
        self._buffer = ""

    def read(self) -> None:
        assert self.process.stdout is not None
        while True:
            try:
                chunk = os.read(self.process.stdout.fileno(), 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self._buffer += chunk.decode()
        *lines, self._buffer = self._buffer.split("\n")
        for line in lines:
            if line.startswith("ASSIGNED"):
                self.assigned = line[len("ASSIGNED") :].strip()
            elif line.startswith("RECORD "):
                self.records.append(line.split()[4])

    def stop(self) -> None:
        """Close the consumer (it leaves the group) and wait for the process."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.write(b"stop\n")
            self.process.stdin.close()
            self.process.wait(TIMEOUT_S)
        self.read()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(TIMEOUT_S)
        self._log_file.close()

    def describe(self) -> str:
        tail = self.log.read_text(errors="replace")[-1500:]
        return f"{self.protocol} assigned={self.assigned!r} records={len(self.records)}\n{tail}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    config = {
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.heartbeat.interval.ms": "500",
    }
    with GatewayStack(Path(tmp_path_factory.mktemp("rolling")), broker_config=config) as s:
        admin = AdminClient(s.client_config("acme"))
        for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            future.result(TIMEOUT_S)
        yield s


def produce(stack: GatewayStack, start: int) -> None:
    producer = Producer(stack.client_config("acme", acks="all"))
    for i in range(start, start + PER_PHASE):
        producer.produce(TOPIC, f"r{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0


def test_rolling_upgrade_from_classic_to_consumer_reads_every_record_once(
    reference_kafka: ReferenceKafka, stack: GatewayStack, tmp_path: Path
) -> None:
    creds = stack.credentials["acme"]
    config = tmp_path / "client.properties"
    config.write_text(
        java_client_properties(stack.bootstrap, {"key_id": creds.key_id, "secret": creds.secret})
    )
    group = f"rolling-{uuid.uuid4().hex[:6]}"
    logs = iter(tmp_path / f"consumer-{i}.log" for i in range(10))
    running = [JavaConsumer(config, group, "classic", next(logs)) for _ in range(2)]
    stopped: list[JavaConsumer] = []

    def printed() -> list[str]:
        for consumer in running:
            consumer.read()
        return [r for c in [*stopped, *running] for r in c.records]

    def split_and_read(total: int, what: str) -> None:
        def done() -> bool:
            records = printed()
            return all(c.assigned for c in running) and len(records) >= total

        try:
            wait_until(done, what=what, timeout=TIMEOUT_S, interval=0.2)
        except AssertionError as exc:
            states = "\n".join(c.describe() for c in [*stopped, *running])
            raise AssertionError(f"{exc}\n{states}") from None

    try:
        split_and_read(0, "two classic consumers assigned")
        produce(stack, 0)
        split_and_read(PER_PHASE, "the classic phase's records")
        for phase, index in enumerate((0, 1), start=1):
            running[index].stop()
            stopped.append(running[index])
            running[index] = JavaConsumer(config, group, "consumer", next(logs))
            split_and_read(PER_PHASE * phase, f"restart {phase}: both consumers assigned")
            produce(stack, PER_PHASE * phase)
            split_and_read(PER_PHASE * (phase + 1), f"restart {phase}: its phase's records")
        for consumer in running:
            consumer.stop()
    finally:
        for consumer in [*stopped, *running]:
            consumer.kill()
    records = printed()
    wanted = [f"r{i}" for i in range(PER_PHASE * 3)]
    assert sorted(records) == sorted(wanted), "every record read and committed exactly once"
