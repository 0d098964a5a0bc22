"""Racks under faults (issue 26, items 1-2), with real brokers and real clients; slow.

- Six brokers on three racks (a: 1-2, b: 3-4, c: 5-6): CreateTopics and CreatePartitions put every
  partition's three replicas on three racks; `pier cluster` shows each broker's rack; Kafka's
  `kafka-reassign-partitions --generate` proposes a plan on three racks too. Then both
  brokers of rack a are killed (SIGKILL) while an acks=all producer (min.insync.replicas=2) writes:
  every acknowledged record is read back afterwards.
- Follower fetching falls back to the leader: a consumer with `client.rack=b` (librdkafka, and
  Kafka's Java consumer: ConsoleConsumer) reads from the follower on rack b (broker 2) while a
  producer writes; broker 2 is killed (it leaves the ISR and the metadata, so the leader stops
  naming it); the consumer goes back to the leader (whose BytesOut grows from then on) and reads
  every acknowledged record, none lost.
- The same Java consumer when its follower stays up but leaves the ISR (the leader's inter-broker
  link cut): it comes back to the leader when its preferred replica expires, and reads there the
  records only the leader holds.
"""

from __future__ import annotations

import json
import subprocess
import threading
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # type: ignore[attr-defined]
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families

from infra.fault_proxy import ProxyLoop
from infra.stack import BrokerProcess, free_port
from pier.cli import main
from tests.cluster_probes import SETTLE_S, TOPIC_SETTLING, metadata_of
from tests.fault.harness import FaultCluster
from tests.polling import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]
REFERENCE = Path(__file__).resolve().parents[2] / "infra" / "reference" / "kafka"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
CONFIG = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "auto.leader.rebalance.enable": "false",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "min.insync.replicas": "2",
    "replica.selector.class": RACK_AWARE,
}


class AckedWriter:
    """An acks=all producer writing numbered values until stopped; `acked` holds the values the
    cluster acknowledged (delivery callbacks without error)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: set[bytes] = set()
        self.failed = 0
        self._stop = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
            }
        )
        self._thread = threading.Thread(target=self._run, name=f"writer-{topic}", daemon=True)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.acked.add(bytes(message.value() or b""))
        else:
            self.failed += 1

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set():
            self._producer.produce(self.topic, value=b"v%08d" % sent, on_delivery=self._delivered)
            sent += 1
            self._producer.poll(0.002)
        self._producer.flush(90)

    def start(self) -> AckedWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive()


def read_all(config: dict[str, Any], topic: str, wanted: set[bytes]) -> set[bytes]:
    """Values read from `topic` from the beginning until every one of `wanted` was seen."""
    consumer = Consumer(
        {
            **config,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    try:

        def complete() -> bool:
            for message in consumer.consume(500, 1.0):
                if message.error() is None:
                    seen.add(bytes(message.value() or b""))
            return wanted <= seen

        wait_until(complete, what=f"every acknowledged record of {topic}", timeout=120)
    finally:
        consumer.close()
    return seen


def racks_of(broker: BrokerProcess, topic: str, racks: dict[int, str]) -> list[set[str]]:
    partitions = metadata_of(broker).topic(topic).partitions
    return [{racks[b] for b in p.replicas} for _, p in sorted(partitions.items())]


def generated_plan(bootstrap: str, topic: str, tmp_path: Path) -> list[dict[str, Any]]:
    """`kafka-reassign-partitions --generate` over brokers 1-6: its proposed partitions (Kafka's
    tool places replicas itself, rack-aware, from the racks DescribeCluster reports)."""
    moving = tmp_path / "topics.json"
    moving.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}), encoding="utf-8")
    argv = [str(REFERENCE), "tool", REASSIGN, "--bootstrap-server", bootstrap, "--generate"]
    argv += ["--topics-to-move-json-file", str(moving), "--broker-list", "1,2,3,4,5,6"]
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]
    proposed = ran.stdout.split("Proposed partition reassignment configuration", 1)[1]
    partitions: list[dict[str, Any]] = json.loads(proposed.strip().splitlines()[0])["partitions"]
    return sorted(partitions, key=lambda p: int(p["partition"]))


def test_six_brokers_three_racks_placement_and_losing_a_whole_rack(
    chroot: str, broker_factory: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    brokers = {
        n: broker_factory(node_id=n, zookeeper=chroot, config={**CONFIG, "broker.rack": rack})
        for n, rack in racks.items()
    }
    wait_until(
        lambda: sorted(metadata_of(brokers[3]).brokers) == sorted(racks),
        what="six brokers registered",
        timeout=SETTLE_S,
    )
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    topic = "placed"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=3)])[topic].result(60)

    def placed(count: int) -> Callable[[], list[set[str]] | None]:
        def found() -> list[set[str]] | None:
            on_racks = racks_of(brokers[3], topic, racks)
            return on_racks if len(on_racks) == count else None

        return found

    created = wait_until(
        placed(6), what="6 partitions of placed", timeout=SETTLE_S, retry_on=TOPIC_SETTLING
    )
    assert created == [{"a", "b", "c"}] * 6
    admin.create_partitions([NewPartitions(topic, 9)])[topic].result(60)

    every = wait_until(
        placed(9), what="9 partitions of placed", timeout=SETTLE_S, retry_on=TOPIC_SETTLING
    )
    assert every == [{"a", "b", "c"}] * 9  # created and added partitions alike

    plan = generated_plan(brokers[3].bootstrap, topic, tmp_path)
    assert [{racks[b] for b in p["replicas"]} for p in plan] == [{"a", "b", "c"}] * 9
    assert main(["cluster", "--bootstrap", brokers[3].bootstrap, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {b["id"]: b["rack"] for b in shown["brokers"]} == racks

    writer = AckedWriter(bootstrap, topic).start()
    try:
        wait_until(lambda: len(writer.acked) >= 2000, what="2000 acknowledged", timeout=SETTLE_S)
        brokers[1].kill()
        brokers[2].kill()
        before_kill = len(writer.acked)
        wait_until(
            lambda: len(writer.acked) >= before_kill + 2000,
            what="2000 more acknowledged with rack a gone",
            timeout=120,
        )
    finally:
        writer.stop()
    survivors = ",".join(brokers[n].bootstrap for n in (3, 4, 5, 6))
    seen = read_all({"bootstrap.servers": survivors}, topic, writer.acked)
    assert writer.acked <= seen


def bytes_out(broker: BrokerProcess, topic: str) -> float:
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "kafka_server_brokertopicmetrics_bytes_out_total"
        and sample.labels.get("topic") == topic
    )


class JavaReader:
    """Kafka's Java consumer (ConsoleConsumer, client.rack=b) printing each value on a line;
    it exits after 20 s without a new record."""

    def __init__(self, bootstrap: str, topic: str, out: Path, extra: tuple[str, ...] = ()) -> None:
        self.out = out
        argv = [str(REFERENCE), "tool", CONSOLE_CONSUMER, "--bootstrap-server", bootstrap]
        argv += ["--topic", topic, "--from-beginning", "--timeout-ms", "20000"]
        argv += ["--consumer-property", "client.rack=b"]
        argv += ["--consumer-property", "request.timeout.ms=5000", *extra]
        with out.open("wb") as sink:
            self.process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.DEVNULL)

    def seen(self) -> set[bytes]:
        return {line for line in self.out.read_bytes().splitlines() if line}

    def wait(self) -> set[bytes]:
        try:
            self.process.wait(timeout=180)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        return self.seen()


@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_the_consumer_falls_back_to_the_leader_when_its_follower_dies(
    chroot: str, broker_factory: Any, tmp_path: Path, client: str
) -> None:
    racks = {1: "a", 2: "b", 3: "c"}
    brokers = {
        n: broker_factory(
            node_id=n,
            zookeeper=chroot,
            config={**CONFIG, "broker.rack": rack},
            metrics_port=free_port(),
        )
        for n, rack in racks.items()
    }
    wait_until(
        lambda: sorted(metadata_of(brokers[1]).brokers) == [1, 2, 3],
        what="three brokers registered",
        timeout=SETTLE_S,
    )
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    topic = "fallback"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])
    admin.create_topics([new])[topic].result(60)
    writer = AckedWriter(bootstrap, topic).start()
    if client == "java":
        reader = JavaReader(bootstrap, topic, tmp_path / "java-consumer.out")
        try:
            wait_until(
                lambda: bytes_out(brokers[2], topic) > 0 and len(reader.seen()) >= 1000,
                what="the Java consumer reading from broker 2 (rack b)",
                timeout=SETTLE_S,
            )
            assert bytes_out(brokers[1], topic) == 0
            brokers[2].kill()
            leader_before = bytes_out(brokers[1], topic)
            wait_until(
                lambda: bytes_out(brokers[1], topic) > leader_before,
                what="the leader serving the Java consumer",
                timeout=120,
            )
        finally:
            writer.stop()
            seen = reader.wait()
        assert writer.acked <= seen
        return
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "near-b",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "client.rack": "b",
        }
    )
    consumer.subscribe([topic])
    seen = set()

    def reading(until: Callable[[], bool]) -> Callable[[], bool]:
        def step() -> bool:
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    seen.add(bytes(message.value() or b""))
            return until()

        return step

    try:
        wait_until(
            reading(lambda: bytes_out(brokers[2], topic) > 0 and len(seen) >= 1000),
            what="the consumer reading from broker 2 (rack b)",
            timeout=SETTLE_S,
        )
        assert bytes_out(brokers[1], topic) == 0
        brokers[2].kill()
        leader_before = bytes_out(brokers[1], topic)
        wait_until(
            reading(lambda: bytes_out(brokers[1], topic) > leader_before),
            what="the leader serving the consumer",
            timeout=120,
        )
        writer.stop()
        wait_until(
            reading(lambda: writer.acked <= seen),
            what="every acknowledged record read",
            timeout=120,
        )
    finally:
        writer.stop()
        consumer.close()
    assert writer.acked <= seen


def test_the_java_consumer_falls_back_to_the_leader_when_its_follower_leaves_the_isr(
    proxy_loop: ProxyLoop,
    broker_factory: Any,
    chroot: str,
    zk_session: KazooClient,
    tmp_path: Path,
) -> None:
    """The followers stay up but stop replicating (the leader's inter-broker link is cut): both
    leave the ISR, the follower on rack b keeps its stale high watermark. The Java consumer's
    preferred replica expires (metadata.max.age.ms), the leader names nobody now, and the records
    written after the shrink, which only the leader holds, reach the consumer: it reads there."""

    def start(**settings: Any) -> BrokerProcess:
        return broker_factory(**settings, metrics_port=free_port())  # type: ignore[no-any-return]

    cluster = FaultCluster(proxy_loop, start, chroot, zk_session)
    racks = {1: "a", 2: "b", 3: "c"}
    try:
        for node, rack in racks.items():
            cluster.start(node, {**CONFIG, "broker.rack": rack, "min.insync.replicas": "1"})
        brokers = {n: b.process for n, b in cluster.brokers.items()}
        wait_until(
            lambda: sorted(metadata_of(brokers[1]).brokers) == [1, 2, 3],
            what="three brokers registered",
            timeout=SETTLE_S,
        )
        bootstrap = ",".join(b.bootstrap for b in brokers.values())
        topic = "stale"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        new = NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])
        admin.create_topics([new])[topic].result(60)
        writer = AckedWriter(bootstrap, topic).start()
        extra = ("--consumer-property", "metadata.max.age.ms=3000")
        reader = JavaReader(bootstrap, topic, tmp_path / "java-consumer.out", extra)
        try:
            wait_until(
                lambda: bytes_out(brokers[2], topic) > 0 and len(reader.seen()) >= 1000,
                what="the Java consumer reading from broker 2 (rack b)",
                timeout=SETTLE_S,
            )
            cluster.brokers[1].link.cut()  # followers can no longer fetch from the leader
            wait_until(
                lambda: list(cluster.state(topic, 0).isr) == [1],
                what="the ISR shrunk to the leader",
                timeout=SETTLE_S,
            )
            shrunk_at = max(int(v[1:]) for v in writer.acked)
            wait_until(
                lambda: any(int(v[1:]) > shrunk_at + 100 for v in reader.seen()),
                what="records written after the shrink read (only the leader has them)",
                timeout=120,
            )
        finally:
            writer.stop()
            seen = reader.wait()
        assert writer.acked <= seen
    finally:
        for broker in cluster.brokers.values():
            broker.link.heal()
            broker.zk_link.heal()
