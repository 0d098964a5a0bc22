"""Follower fetching (KIP-392) on three real brokers on racks a, b, c with
`replica.selector.class=RackAwareReplicaSelector`, read by real clients with `client.rack`:
librdkafka (confluent-kafka) and Kafka's Java consumer (ConsoleConsumer, kafka-clients 4.1.1),
straight to the brokers and through the tenant gateway. Which broker served the records is read
from each broker's BytesOut counter (`kafka_server_brokertopicmetrics_bytes_out_total{topic}`,
consumers' record bytes only; replication is ReplicationBytesOut): the follower on the client's
rack serves them all, the leader and the other follower none. A consumer without `client.rack`
reads from the leader.

One module fleet (ZooKeeper chroot, three brokers, a tenant store and a gateway) serves every test;
each test has its own topic with replicas [1, 2, 3] (leader 1, on rack a)."""

from __future__ import annotations

import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from prometheus_client.parser import text_string_to_metric_families

from infra.gateway import GatewayProcess, start_gateway
from infra.stack import BrokerProcess, ZooKeeperProcess, free_port, start_broker
from tenancy.store import TenantStore
from tests.cluster_probes import SETTLE_S, metadata_of
from tests.gateway_stack import TEST_GATEWAY_SETTINGS, Credentials, GatewayStack
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
RACKS = {1: "a", 2: "b", 3: "c"}
CONFIG = {
    "replica.selector.class": RACK_AWARE,
    "zookeeper.session.timeout.ms": "6000",
    "auto.leader.rebalance.enable": "false",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "min.insync.replicas": "2",
}
RECORDS, VALUE_BYTES = 200, 1000
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
REFERENCE = Path(__file__).resolve().parents[3] / "infra" / "reference" / "kafka"


@dataclass
class RackFleet:
    brokers: dict[int, BrokerProcess]
    gateway: GatewayProcess
    tenant: Credentials
    root: Path

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def tenant_config(self, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.gateway.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": self.tenant.key_id,
            "sasl.password": self.tenant.secret,
            **extra,
        }


def module_chroot(zookeeper: ZooKeeperProcess) -> str:
    path = f"/pier-racks-{uuid.uuid4().hex[:12]}"

    def session() -> KazooClient:
        client = KazooClient(hosts=zookeeper.connect)
        try:
            client.start(5)
        except KazooTimeoutError:
            client.close()
            raise
        return client

    root = wait_until(session, what="a ZooKeeper session", retry_on=(KazooTimeoutError,))
    root.ensure_path(path)
    root.stop()
    root.close()
    return f"{zookeeper.connect}{path}"


@pytest.fixture(scope="module")
def fleet(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperProcess
) -> Iterator[RackFleet]:
    root = tmp_path_factory.mktemp("racks")
    chroot = module_chroot(zookeeper)
    started: list[Any] = []
    try:
        brokers = {}
        for node, rack in RACKS.items():
            brokers[node] = start_broker(
                root / f"broker-{node}" / "data",
                node_id=node,
                config={**CONFIG, "broker.rack": rack},
                metrics_port=free_port(),
                zookeeper=chroot,
            )
            started.append(brokers[node])
        wait_until(
            lambda: sorted(metadata_of(brokers[1]).brokers) == [1, 2, 3],
            what="brokers 1-3 registered",
            timeout=SETTLE_S,
        )
        db_url = f"sqlite:///{root / 'tenancy.db'}"
        with TenantStore.open(db_url) as store:
            store.upgrade()
            tenant = GatewayStack.add_tenant(store, "acme")
        gateway = start_gateway(
            root / "gateway",
            ",".join(b.bootstrap for b in brokers.values()),
            db_url,
            node_ids=list(brokers),
            properties={**TEST_GATEWAY_SETTINGS, "usage.topic.replication.factor": "3"},
        )
        started.append(gateway)
        yield RackFleet(brokers, gateway, tenant, root)
    finally:
        for process in reversed(started):
            process.stop()


def bytes_out(broker: BrokerProcess, topic: str) -> float:
    """Consumers' record bytes this broker served from `topic` (BytesOut)."""
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "kafka_server_brokertopicmetrics_bytes_out_total"
        and sample.labels.get("topic", "").endswith(topic)
    )


def replication_out(broker: BrokerProcess) -> float:
    """Record bytes this broker sent to followers, all topics (ReplicationBytesOut)."""
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "kafka_server_brokertopicmetrics_replication_bytes_out_total"
    )


def served(fleet: RackFleet, topic: str) -> dict[int, float]:
    return {node: bytes_out(broker, topic) for node, broker in fleet.brokers.items()}


def create_and_fill(config: dict[str, Any], topic: str, *, manual: bool = True) -> None:
    """`topic`, with replicas [1, 2, 3] (leader 1) when `manual` (tenants may not place
    replicas: theirs get three by the brokers' default), RECORDS values written acks=all."""
    admin = AdminClient(config)
    if manual:
        new = NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])
    else:
        new = NewTopic(topic, num_partitions=1)
    admin.create_topics([new])[topic].result(timeout=60)
    producer = Producer({**config, "acks": "all", "linger.ms": 5})
    wait_until(
        lambda: not producer.list_topics(topic, timeout=5).topics[topic].error,
        what=f"{topic} in the metadata",
        timeout=SETTLE_S,
    )
    for i in range(RECORDS):
        producer.produce(topic, value=b"%06d" % i + b"x" * (VALUE_BYTES - 6))
    assert producer.flush(60) == 0


def follower_racks(fleet: RackFleet, topic: str) -> tuple[int, list[int]]:
    """The leader of the tenant topic ending in `topic` and its followers, seen directly."""
    metadata = AdminClient({"bootstrap.servers": fleet.bootstrap}).list_topics(timeout=10)
    (name,) = [n for n in metadata.topics if n.endswith(topic)]
    partition = metadata.topics[name].partitions[0]
    return partition.leader, [r for r in partition.replicas if r != partition.leader]


def consume_librdkafka(config: dict[str, Any], topic: str, rack: str | None) -> list[bytes]:
    settings = {
        **config,
        "group.id": f"g-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if rack is not None:
        settings["client.rack"] = rack
    consumer = Consumer(settings)
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:

        def read_all() -> bool:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(bytes(message.value() or b""))
            return len(values) >= RECORDS

        wait_until(read_all, what=f"{RECORDS} records of {topic}", timeout=SETTLE_S)
    finally:
        consumer.close()
    return values


def consume_java(bootstrap: str, topic: str, rack: str, extra: list[str]) -> list[str]:
    argv = [str(REFERENCE), "tool", CONSOLE_CONSUMER, "--bootstrap-server", bootstrap]
    argv += ["--topic", topic, "--from-beginning", "--max-messages", str(RECORDS)]
    argv += ["--timeout-ms", "60000", "--consumer-property", f"client.rack={rack}", *extra]
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]
    return ran.stdout.splitlines()


def assert_all(values: list[bytes] | list[str]) -> None:
    prefixes = sorted({int(v[:6]) for v in values})
    assert prefixes == list(range(RECORDS))


def test_librdkafka_reads_from_the_follower_on_its_rack(fleet: RackFleet) -> None:
    topic = f"near-{uuid.uuid4().hex[:8]}"
    create_and_fill({"bootstrap.servers": fleet.bootstrap}, topic)
    before = served(fleet, topic)
    assert_all(consume_librdkafka({"bootstrap.servers": fleet.bootstrap}, topic, "b"))
    after = served(fleet, topic)
    delta = {node: after[node] - before[node] for node in after}
    assert delta[2] >= RECORDS * VALUE_BYTES  # the follower on rack b served every record
    assert delta[1] == 0 and delta[3] == 0
    # the leader's replication to its two followers is counted apart (ReplicationBytesOut)
    assert replication_out(fleet.brokers[1]) >= 2 * RECORDS * VALUE_BYTES


def test_without_client_rack_the_leader_serves(fleet: RackFleet) -> None:
    topic = f"plain-{uuid.uuid4().hex[:8]}"
    create_and_fill({"bootstrap.servers": fleet.bootstrap}, topic)
    before = served(fleet, topic)
    assert_all(consume_librdkafka({"bootstrap.servers": fleet.bootstrap}, topic, None))
    after = served(fleet, topic)
    assert after[1] - before[1] >= RECORDS * VALUE_BYTES
    assert after[2] == before[2] and after[3] == before[3]


def test_librdkafka_through_the_gateway_reads_from_the_follower_on_its_rack(
    fleet: RackFleet,
) -> None:
    topic = f"gw-{uuid.uuid4().hex[:8]}"
    create_and_fill(fleet.tenant_config(), topic, manual=False)
    leader, (near, far) = follower_racks(fleet, topic)
    before = served(fleet, topic)
    assert_all(consume_librdkafka(fleet.tenant_config(), topic, RACKS[near]))
    after = served(fleet, topic)
    delta = {node: after[node] - before[node] for node in after}
    assert delta[near] >= RECORDS * VALUE_BYTES  # reached on the gateway's port for `near`
    assert delta[leader] == 0 and delta[far] == 0


def test_java_consumer_reads_from_the_follower_on_its_rack(fleet: RackFleet) -> None:
    topic = f"java-{uuid.uuid4().hex[:8]}"
    create_and_fill({"bootstrap.servers": fleet.bootstrap}, topic)
    before = served(fleet, topic)
    assert_all(consume_java(fleet.bootstrap, topic, "c", []))
    after = served(fleet, topic)
    delta = {node: after[node] - before[node] for node in after}
    assert delta[3] >= RECORDS * VALUE_BYTES
    assert delta[1] == 0 and delta[2] == 0


def test_java_consumer_through_the_gateway_reads_from_the_follower_on_its_rack(
    fleet: RackFleet,
) -> None:
    topic = f"javagw-{uuid.uuid4().hex[:8]}"
    create_and_fill(fleet.tenant_config(), topic, manual=False)
    leader, (far, near) = follower_racks(fleet, topic)
    properties = fleet.root / "tenant-client.properties"
    properties.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{fleet.tenant.key_id}" password="{fleet.tenant.secret}";\n',
        encoding="utf-8",
    )
    properties.chmod(0o600)
    before = served(fleet, topic)
    extra = ["--consumer.config", str(properties)]
    assert_all(consume_java(fleet.gateway.bootstrap, topic, RACKS[near], extra))
    after = served(fleet, topic)
    delta = {node: after[node] - before[node] for node in after}
    assert delta[near] >= RECORDS * VALUE_BYTES
    assert delta[leader] == 0 and delta[far] == 0
