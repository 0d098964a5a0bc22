"""Large Fetch answers stream through the gateway (`gateway.kafka.raw.fetch_stream`), their
record bytes spliced from the broker's socket to the client's (`gateway.kafka.splice_relay`):
answers of 64 KiB and more go to the client as the broker's bytes arrive, the topic renamed in the
streamed head. Real clients with different Fetch versions (librdkafka v12 with tagged fields and
fetch sessions, kafka-python's older classic versions) read megabytes of records back exactly, in
order, per partition, from an uncompressed topic and from an lz4 topic of many partitions; the
gateway's `pier_gateway_spliced_bytes_total` shows the bytes went socket to socket. A client that
vanishes (RST) in the middle of a multi-megabyte answer leaves no descriptor behind in the gateway
and other clients are served as before. Over TLS nothing is spliced and the bytes are the same."""

from __future__ import annotations

import datetime
import json
import os
import random
import socket
import struct
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka.structs import TopicPartition as KpTopicPartition
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64
from prometheus_client.parser import text_string_to_metric_families

from infra.probes import free_port
from tests.e2e.gateway.clients import security_settings
from tests.e2e.gateway.sasl_wire import login
from tests.e2e.gateway.test_tls import self_signed
from tests.e2e.kafka_admin import create_topic
from tests.e2e.raw_wire import frame, request_bytes
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

PLAIN_TOPIC, PLAIN_PARTITIONS = "streamed-answers", 2
LZ4_TOPIC, LZ4_PARTITIONS = "streamed-lz4", 8
RECORDS = 3_000  # per partition of the plain topic, 1 KiB each: answers of up to megabytes
LZ4_RECORDS = 1_000  # per partition of the lz4 topic
TIMEOUT_S = 60.0
SPLICED = "pier_gateway_spliced_bytes_total"


def value(partition: int, index: int) -> bytes:
    """1 KiB: half pattern, half noise (lz4 halves it: its answers are megabytes too)."""
    head = f"{partition}:{index}:".encode()
    noise = random.Random(partition * 1_000_003 + index).randbytes(512)
    return head + noise + bytes((index + k) % 251 for k in range(512 - len(head)))


TOPICS = {
    PLAIN_TOPIC: (PLAIN_PARTITIONS, RECORDS, "none"),
    LZ4_TOPIC: (LZ4_PARTITIONS, LZ4_RECORDS, "lz4"),
}


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(
        Path(tmp_path_factory.mktemp("streaming")), gateway_metrics_port=free_port()
    ) as stack:
        yield stack


def fill(stack: GatewayStack, names: list[str]) -> None:
    security = stack.client_config("acme", "PLAIN")
    security.pop("bootstrap.servers")
    for name in names:
        partitions, records, codec = TOPICS[name]
        create_topic(stack.bootstrap, name, partitions, security=security)
        producer = Producer(
            stack.client_config(
                "acme", "PLAIN", acks="all", **{"linger.ms": 20, "compression.type": codec}
            )
        )
        for index in range(records):
            for partition in range(partitions):
                producer.produce(name, value(partition, index), partition=partition)
            producer.poll(0)
        assert producer.flush(60) == 0


@pytest.fixture(scope="module")
def topics(gateway_stack: GatewayStack) -> dict[str, tuple[int, int, str]]:
    fill(gateway_stack, list(TOPICS))
    return TOPICS


@pytest.fixture(scope="module")
def tls_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    root = Path(tmp_path_factory.mktemp("streaming-tls"))
    with GatewayStack(root, tls=self_signed(root), gateway_metrics_port=free_port()) as stack:
        fill(stack, [PLAIN_TOPIC])
        yield stack


def expected(topic: str) -> dict[int, list[bytes]]:
    partitions, records, _codec = TOPICS[topic]
    return {p: [value(p, i) for i in range(records)] for p in range(partitions)}


def spliced_bytes(stack: GatewayStack) -> float:
    assert stack.gateway is not None and stack.gateway.metrics_port is not None
    url = f"http://{stack.gateway.host}:{stack.gateway.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == SPLICED and sample.labels.get("tenant") == "acme"
    )


def read_with_librdkafka(stack: GatewayStack, topic: str) -> dict[int, list[bytes]]:
    partitions, records, _codec = TOPICS[topic]
    settings = {"group.id": "streaming", "enable.auto.commit": False, "fetch.max.bytes": 8 << 20}
    consumer = Consumer(stack.client_config("acme", "PLAIN", **settings))
    seen: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])

        def consumed() -> bool:
            for message in consumer.consume(num_messages=2_000, timeout=0.5):
                assert message.error() is None, message.error()
                partition, record = message.partition(), message.value()
                assert partition is not None and record is not None
                seen[partition].append(record)
            return sum(len(v) for v in seen.values()) >= records * partitions

        wait_until(consumed, what="every record through the gateway", timeout=TIMEOUT_S)
    finally:
        consumer.close()
    return seen


def read_with_kafka_python(stack: GatewayStack, topic: str) -> dict[int, list[bytes]]:
    partitions, records, _codec = TOPICS[topic]
    security = security_settings("kafka-python", stack.credentials["acme"], "PLAIN")
    consumer = KafkaConsumer(
        bootstrap_servers=stack.bootstrap,
        enable_auto_commit=False,
        fetch_max_bytes=8 << 20,
        max_partition_fetch_bytes=4 << 20,
        **security,
    )
    seen: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        assigned = [KpTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)

        def consumed() -> bool:
            for tp, batch in consumer.poll(timeout_ms=500, max_records=5_000).items():
                seen[tp.partition].extend(r.value for r in batch)
            return sum(len(v) for v in seen.values()) >= records * partitions

        wait_until(consumed, what="every record through the gateway", timeout=TIMEOUT_S)
    finally:
        consumer.close()
    return seen


READERS = {"librdkafka": read_with_librdkafka, "kafka-python": read_with_kafka_python}


@pytest.mark.parametrize("topic", [PLAIN_TOPIC, LZ4_TOPIC])
@pytest.mark.parametrize("client", sorted(READERS))
def test_clients_read_megabytes_of_spliced_answers_exactly(
    gateway_stack: GatewayStack, topics: dict[str, tuple[int, int, str]], client: str, topic: str
) -> None:
    before = spliced_bytes(gateway_stack)
    seen = READERS[client](gateway_stack, topic)
    assert seen == expected(topic)
    assert spliced_bytes(gateway_stack) - before > 256 * 1024, "no answer went socket to socket"


def test_over_tls_answers_stream_through_user_space_exactly(tls_stack: GatewayStack) -> None:
    """TLS encrypts in user space: nothing may be spliced into a TLS socket."""
    before = spliced_bytes(tls_stack)
    assert read_with_librdkafka(tls_stack, PLAIN_TOPIC) == expected(PLAIN_TOPIC)
    assert spliced_bytes(tls_stack) == before


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_client_gone_mid_answer_leaves_no_descriptor_and_others_are_served(
    gateway_stack: GatewayStack, topics: dict[str, tuple[int, int, str]]
) -> None:
    assert gateway_stack.gateway is not None
    pid = gateway_stack.gateway.pid
    baseline = open_fds(pid)
    partitions = [
        FetchPartition(
            partition=i32(p),
            current_leader_epoch=i32(-1),
            fetch_offset=i64(0),
            last_fetched_epoch=i32(-1),
            log_start_offset=i64(-1),
            partition_max_bytes=i32(8 << 20),
        )
        for p in range(PLAIN_PARTITIONS)
    ]
    request = FetchRequest(
        cluster_id=None,
        replica_id=BrokerId(-1),
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)),
        min_bytes=i32(1),
        max_bytes=i32(32 << 20),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName(PLAIN_TOPIC), partitions=tuple(partitions)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    connection = login(gateway_stack, "acme")
    try:
        connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        connection.send(frame(request_bytes(request, 99)))
        (size,) = struct.unpack(">i", connection._read_exactly(4))
        assert size > 4 << 20, f"a {size}-byte answer is not the multi-megabyte one wanted"
        connection._read_exactly(64 * 1024)  # some of it, then vanish with the rest unread
        connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        connection.close()
    wait_until(
        lambda: open_fds(pid) <= baseline,
        what=f"the gateway back to {baseline} descriptors",
        timeout=TIMEOUT_S,
    )
    assert read_with_librdkafka(gateway_stack, PLAIN_TOPIC) == expected(PLAIN_TOPIC)
    wait_until(lambda: open_fds(pid) <= baseline, what="descriptors released", timeout=TIMEOUT_S)


PARKED_WAIT_MS = 30_000  # the idle consumer's long poll: far past the other clients' deadline
OTHER_CLIENT_DEADLINE_S = 10.0


def test_an_idle_consumers_long_poll_does_not_stall_the_tenants_other_connections(
    gateway_stack: GatewayStack, topics: dict[str, tuple[int, int, str]]
) -> None:
    """A consumer at the end of its log keeps a Fetch parked at the broker for `fetch.wait.max.ms`
    (librdkafka asks for `fetch.max.bytes`, 50 MiB, more than the tenant's 32 MiB budget). The
    budget the gateway holds for that answer must leave room for the tenant's other requests: a
    second connection's Metadata and Produce are read and answered while the poll is parked (not
    when it ends 30 s later), and a second consumer still gets answers of megabytes, not of the
    64 KiB floor (a consume of 6 MB within a bound on its Fetch count)."""
    settings = {"group.id": "parked", "enable.auto.commit": False, "fetch.min.bytes": 1}
    security = gateway_stack.client_config("acme", "PLAIN")
    security.pop("bootstrap.servers")
    create_topic(gateway_stack.bootstrap, "while-parked", 1, security=security)
    parked = Consumer(
        gateway_stack.client_config(
            "acme", "PLAIN", **settings, **{"fetch.wait.max.ms": PARKED_WAIT_MS}
        )
    )
    try:
        parked.assign([TopicPartition(PLAIN_TOPIC, 0, RECORDS)])  # the end: nothing to read
        parked.consume(num_messages=1, timeout=1.0)  # connected; its long poll is parked now
        producer = Producer(gateway_stack.client_config("acme", "PLAIN", acks="all"))
        producer.produce("while-parked", b"while-parked")
        assert producer.flush(OTHER_CLIENT_DEADLINE_S) == 0, "produce stalled behind the poll"
        stats: list[str] = []
        reader = Consumer(
            gateway_stack.client_config(
                "acme",
                "PLAIN",
                **settings,
                **{"statistics.interval.ms": 100, "stats_cb": stats.append},
            )
        )
        try:
            reader.assign([TopicPartition(PLAIN_TOPIC, 0, 0)])
            seen = 0
            while seen < RECORDS:
                batch = reader.consume(num_messages=RECORDS, timeout=OTHER_CLIENT_DEADLINE_S)
                assert batch, "the second consumer stalled behind the poll"
                seen += sum(1 for m in batch if m.error() is None)
            stats.clear()  # the next statistics count every Fetch of the consume
            wait_until(lambda: bool(reader.poll(0.1) or stats), what="statistics", timeout=10)
            fetches = _fetch_requests(stats[-1])
        finally:
            reader.close()
        # 3 MB of records: a handful of Fetch answers of megabytes (48 at the 64 KiB floor)
        assert fetches <= 12, f"{fetches} Fetch requests for {RECORDS} KiB"
    finally:
        parked.close()


def _fetch_requests(statistics: str) -> int:
    """Fetch requests a consumer has sent (librdkafka's statistics: each broker's `req.Fetch`)."""
    return sum(
        int(b.get("req", {}).get("Fetch", 0))
        for name, b in json.loads(statistics)["brokers"].items()
        if not name.startswith("GroupCoordinator")
    )
