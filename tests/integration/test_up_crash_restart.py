"""`infra/up` after `kill -9` of a broker (issue 13 acceptance): the rest keep running, and
`infra/up` run again brings the broker back, in sync, with no acknowledged record lost.

The real stack under a tmp root on free ports: ZooKeeper, three brokers in ZooKeeper mode (RF 3,
min.insync.replicas 2, 6 s session timeout: `infra/up`'s defaults), the admin API and the gateway
(the billing rollup is left out: it needs Spark and is not what is tested). confluent-kafka
produces with acks=all before the kill and while the broker is down; broker 3 is killed with
SIGKILL; `infra/up` must say so and keep everything else running. Running `infra/up` again with
the same arguments asks the running launcher to restart what died and exits. Then broker 3 must
rejoin the ISR of every partition, hold the same batches as the other replicas, and a consumer
must read back every acknowledged record.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.records.batch import iter_headers
from brokers.records.errors import CorruptRecordError
from infra.process import pid_running
from infra.stack import free_port
from tests.integration.test_launcher import children_of
from tests.integration.test_up_cluster import REPO, consecutive_free_ports, kinds, wait_for
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 6
RECORDS_EACH_PHASE = 300
SETTLE_S = 90.0


class AckedProducer:
    """confluent-kafka with acks=all; remembers every value a delivery report acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: set[bytes] = set()
        self.errors: list[str] = []
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

    def produce(self, topic: str, prefix: str, count: int) -> None:
        for i in range(count):
            value = f"{prefix}-{i}".encode()
            self._producer.produce(topic, value, partition=i % PARTITIONS, on_delivery=self._report)
        remaining = self._producer.flush(SETTLE_S)
        assert remaining == 0, f"{remaining} records of {prefix!r} not delivered in {SETTLE_S}s"
        assert not self.errors, f"delivery failures: {self.errors[:5]}"

    def _report(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.errors.append(str(error))
        else:
            self.acked.add(bytes(message.value() or b""))


def partitions_of(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition → (leader, ISR) as the cluster's metadata tells a client."""
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    info = meta.topics[topic]
    if info.error is not None:
        return {}
    return {p.id: (p.leader, sorted(p.isrs)) for p in info.partitions.values()}


def all_in_sync(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]] | None:
    found = partitions_of(bootstrap, topic)
    ok = len(found) == PARTITIONS and all(isr == [1, 2, 3] for _, isr in found.values())
    return found if ok else None


def consume_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """Every record of `topic` from offset 0, until `expected` were read (or the deadline)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}"}
    )
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []

    def read_enough() -> bool:
        for message in consumer.consume(500, timeout=1.0):
            if message.error() is None:
                values.append(bytes(message.value() or b""))
        return len(values) >= expected

    try:
        wait_until(read_enough, what=f"{expected} records read back", timeout=SETTLE_S, interval=0)
    finally:
        consumer.close()
    return values


def replica_batches(state: Path, node_id: int, topic: str, partition: int) -> list[tuple[int, int]]:
    """(base offset, CRC) of every batch in broker `node_id`'s copy of the partition."""
    directory = state / f"broker-{node_id}" / "data" / f"{topic}-{partition}"
    found: list[tuple[int, int]] = []
    for segment in sorted(directory.glob("*.log")):
        found += [(h.base_offset, h.crc) for _, h in iter_headers(segment.read_bytes())]
    return found


def identical_replicas(state: Path, topic: str) -> bool:
    for partition in range(PARTITIONS):
        copies = [replica_batches(state, n, topic, partition) for n in (1, 2, 3)]
        if not copies[0] or copies[1:] != [copies[0], copies[0]]:
            return False
    return True


def up_argv(tmp_path: Path) -> tuple[list[str], str]:
    """`infra/up`'s command line on free ports under `tmp_path/state`, and the bootstrap list."""
    port = consecutive_free_ports(3)
    zookeeper_port, admin_port = free_port(), free_port()
    taken = {port, port + 1, port + 2, zookeeper_port, admin_port}
    gateway_port = consecutive_free_ports(5)
    while taken & set(range(gateway_port, gateway_port + 5)):
        gateway_port = consecutive_free_ports(5)
    argv = [sys.executable, "-m", "infra.up_main", "--root", str(tmp_path / "state")]
    argv += ["--port", str(port), "--zookeeper-port", str(zookeeper_port), "--metrics-port", "0"]
    argv += ["--admin-port", str(admin_port), "--gateway-port", str(gateway_port)]
    argv += ["--gateway-metrics-port", "0", "--no-billing"]
    return argv, ",".join(f"127.0.0.1:{port + i}" for i in range(3))


def launch(argv: list[str], output: Path) -> subprocess.Popen[bytes]:
    with output.open("wb") as sink:
        return subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)


def kill_broker_3(up: subprocess.Popen[bytes], output: Path) -> int:
    """SIGKILL broker 3 and wait for infra/up to report it; its PID."""
    children = children_of(up.pid)
    (victim,) = [pid for pid, cmd in children.items() if " --node-id 3 " in f"{cmd} "]
    os.kill(victim, signal.SIGKILL)
    wait_for(
        output,
        up,
        f"broker 3 (pid {victim}) died: exit -9; the rest keep running;"
        " run infra/up again to restart it",
    )
    return victim


def check_back_in_sync(state: Path, bootstrap: str, topic: str, acked: set[bytes]) -> float:
    """Broker 3 in every ISR, the same batches on all replicas, every acknowledged record read
    back; the seconds until the ISRs were complete."""
    started = time.monotonic()
    wait_until(
        lambda: all_in_sync(bootstrap, topic),
        what="broker 3 back in the ISR of every partition",
        timeout=SETTLE_S,
    )
    rejoined_s = time.monotonic() - started
    wait_until(
        lambda: identical_replicas(state, topic),
        what="the same batches on all three replicas",
        timeout=SETTLE_S,
        retry_on=(CorruptRecordError,),  # a batch being appended is read half-written
    )
    values = consume_all(bootstrap, topic, len(acked))
    lost = acked - set(values)
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost: {sorted(lost)[:5]}"
    return rejoined_s


def new_topic(bootstrap: str) -> str:
    topic = f"crash-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)
    wait_until(lambda: all_in_sync(bootstrap, topic), what="RF 3 topic in sync", timeout=60)
    return topic


def test_a_killed_broker_is_reported_and_infra_up_again_brings_it_back_in_sync(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    argv, bootstrap = up_argv(tmp_path)
    output = tmp_path / "up.out"
    up = launch(argv, output)
    children: dict[int, str] = {}
    try:
        wait_for(output, up, "Press Ctrl-C")
        record = json.loads((state / "stack.json").read_text())
        assert record["launcher"]["pid"] == up.pid
        topic = new_topic(bootstrap)
        producer = AckedProducer(bootstrap)
        producer.produce(topic, "before", RECORDS_EACH_PHASE)

        kill_broker_3(up, output)
        survivors = children_of(up.pid)
        assert kinds(survivors) == ["admin-api", "broker", "broker", "gateway", "zookeeper"], (
            f"after the kill: {survivors}"
        )
        # The cluster carries on without broker 3 (min.insync.replicas 2 of 3).
        producer.produce(topic, "while-down", RECORDS_EACH_PHASE)

        again = subprocess.run(
            argv, cwd=REPO, capture_output=True, text=True, timeout=240, check=False
        )
        assert again.returncode == 0, f"infra/up again:\n{again.stdout}\n{again.stderr}"
        assert "broker 3 restarted" in again.stdout, again.stdout
        assert up.poll() is None, "the first infra/up should still run"
        assert len(producer.acked) == 2 * RECORDS_EACH_PHASE
        rejoined_s = check_back_in_sync(state, bootstrap, topic, producer.acked)
        print(f"broker 3 in every ISR {rejoined_s:.1f}s after `infra/up` again returned")

        children = children_of(up.pid)
        assert kinds(children) == [
            "admin-api",
            "broker",
            "broker",
            "broker",
            "gateway",
            "zookeeper",
        ]
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=120) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert not any(pid_running(pid) for pid in children)
    assert not (state / "stack.json").exists(), "the record outlived its launcher"
    text = output.read_text()
    assert "infra/up: broker 3 restarted" in text and "infra/up: stopped." in text


def test_infra_up_comes_back_after_a_kill_then_ctrl_c_within_the_session_timeout(
    tmp_path: Path,
) -> None:
    """The issue's report: Ctrl-C right after the kill stopped ZooKeeper with the dead broker's
    session still alive, and every later `infra/up` failed on its re-armed registration (while
    the controlled shutdowns of the others had moved their leaderships onto the dead broker)."""
    state = tmp_path / "state"
    argv, bootstrap = up_argv(tmp_path)
    first = launch(argv, tmp_path / "up-1.out")
    try:
        wait_for(tmp_path / "up-1.out", first, "Press Ctrl-C")
        topic = new_topic(bootstrap)
        producer = AckedProducer(bootstrap)
        producer.produce(topic, "before", RECORDS_EACH_PHASE)
        kill_broker_3(first, tmp_path / "up-1.out")
        first.send_signal(signal.SIGINT)  # well inside broker 3's 6 s session timeout
        assert first.wait(timeout=120) == 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()

    second = launch(argv, tmp_path / "up-2.out")
    children: dict[int, str] = {}
    try:
        wait_for(tmp_path / "up-2.out", second, "Press Ctrl-C")
        children = children_of(second.pid)
        assert kinds(children) == [
            "admin-api",
            "broker",
            "broker",
            "broker",
            "gateway",
            "zookeeper",
        ]
        rejoined_s = check_back_in_sync(state, bootstrap, topic, producer.acked)
        print(f"broker 3 in every ISR {rejoined_s:.1f}s after the second infra/up was up")
        assert second.poll() is None, (tmp_path / "up-2.out").read_text()[-2000:]
        second.send_signal(signal.SIGINT)
        assert second.wait(timeout=120) == 0
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
    assert not any(pid_running(pid) for pid in children)
