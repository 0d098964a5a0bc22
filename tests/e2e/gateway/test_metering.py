"""Usage metering through the gateway (issue 10, acceptance): the bytes in `__usage` for each
(tenant, principal, client-id, topic) equal what the clients sent and received, computed by the
test on its own; requests, connection time and storage samples are recorded; a gateway stopped
with SIGTERM flushes what it metered.

The expected bytes come from the broker, not the gateway: each producer client id writes its own
partition of a topic both tenants create under the same name, so the record batches stored in
that partition (read straight from the broker with the project's client, their sizes summed) are
exactly the batches that client sent, and DescribeLogDirs must agree with that sum. A consumer
whose fetch limits exceed the topic's size gets every batch whole in one fetch, so what it was
sent is the sum of both partitions. The gateway flushes every 500 ms in the test stack; the test
reads `__usage` straight from the broker, decodes with `tenancy.usage.decode`, de-duplicates by
id, and polls (`tests.polling.wait_until`) until the sums settle or a deadline passes.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.client import TopicPartition as FleetPartition
from infra.gateway import GatewayProcess, start_gateway
from tenancy.usage import StorageSample, TrafficRecord, UsageRecord
from tests.e2e.gateway.broker_log import batch_bytes, log_dir_sizes, usage_records
from tests.gateway_stack import TENANTS, TEST_GATEWAY_SETTINGS, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

DEADLINE_S = 30.0
PRODUCERS = {"meter-a": (0, "none"), "meter-b": (1, "lz4")}  # client id → (partition, codec)
CONSUMER = "meter-c"
FLUSHES = 4  # produce requests per producer: one per flush
RECORDS_PER_FLUSH = 50
Key = tuple[str, str, str, str | None]  # (tenant, principal, client id, topic)


def traffic(records: dict[str, UsageRecord]) -> dict[Key, dict[str, int]]:
    """Counters summed per (tenant, principal, client id, topic) over all windows."""
    sums: dict[Key, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for record in records.values():
        if isinstance(record, TrafficRecord):
            counters = sums[(record.tenant, record.principal, record.client_id, record.topic)]
            for name in ("bytes_in", "bytes_out", "requests", "throttle_ms", "connection_ms"):
                counters[name] += getattr(record, name)
    return sums


def produce(
    stack: GatewayStack, tenant: str, client_id: str, topic: str, partition: int, codec: str
) -> int:
    """Keyed records in `FLUSHES` produce requests; returns how many records."""
    producer = Producer(
        stack.client_config(
            tenant,
            "PLAIN",
            **{
                "client.id": client_id,
                "acks": "all",
                "linger.ms": 60_000,  # nothing goes before a flush: one request per flush
                "compression.type": codec,
                "enable.idempotence": False,
            },
        )
    )
    count = 0
    for flush in range(FLUSHES):
        for i in range(RECORDS_PER_FLUSH):
            key = f"{tenant}-{client_id}-{flush}-{i}".encode()
            value = os.urandom(50 + (i * 37) % 400) + b"x" * (i * 11 % 300)
            producer.produce(topic, value, key, partition=partition)
            count += 1
        assert producer.flush(30) == 0
    return count


def consume(stack: GatewayStack, tenant: str, topic: str, expected: int) -> set[bytes]:
    consumer = Consumer(
        stack.client_config(
            tenant,
            "PLAIN",
            **{
                "client.id": CONSUMER,
                "group.id": f"{topic}-meter",
                "enable.auto.commit": False,
                "fetch.max.bytes": 50 << 20,  # far above the topic: every fetch has whole batches
                "max.partition.fetch.bytes": 50 << 20,
            },
        )
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    keys: set[bytes] = set()

    def all_consumed() -> bool:
        for message in consumer.consume(500, 0.5):
            assert message.error() is None, message.error()
            keys.add(message.key() or b"")
        return len(keys) >= expected

    try:
        wait_until(
            all_consumed,
            what=f"{tenant}: {expected} records consumed",
            timeout=DEADLINE_S,
            interval=0,
        )
    finally:
        consumer.close()
    assert len(keys) == expected, f"{tenant}: consumed {len(keys)} of {expected}"
    return keys


def principal(stack: GatewayStack, tenant: str) -> str:
    return stack.credentials[tenant].service_account


@pytest.fixture
def metered_topic(gateway_stack: GatewayStack, topic_name: str) -> Iterator[str]:
    """`topic_name` created with two partitions in both tenants."""
    for tenant in TENANTS:
        admin = AdminClient(gateway_stack.client_config(tenant, **{"client.id": "meter-admin"}))
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
    yield topic_name


def test_usage_bytes_equal_what_the_clients_sent_and_received(
    gateway_stack: GatewayStack, metered_topic: str
) -> None:
    topic = metered_topic
    assert gateway_stack.broker is not None
    broker = gateway_stack.broker
    for tenant in TENANTS:
        produced = sum(
            produce(gateway_stack, tenant, client_id, topic, partition, codec)
            for client_id, (partition, codec) in PRODUCERS.items()
        )
        consume(gateway_stack, tenant, topic, produced)

    partitions = [FleetPartition(f"{t}_{topic}", p) for t in TENANTS for p in (0, 1)]
    stored = batch_bytes(broker.bootstrap, partitions)
    sizes = log_dir_sizes(broker.bootstrap, broker.node_id)
    assert {tp: sizes[tp] for tp in partitions} == stored  # the log holds just those batches
    expected: dict[Key, dict[str, int]] = {}
    for tenant in TENANTS:
        sa = principal(gateway_stack, tenant)
        for client_id, (partition, _codec) in PRODUCERS.items():
            bytes_in = stored[FleetPartition(f"{tenant}_{topic}", partition)]
            expected[(tenant, sa, client_id, topic)] = {"bytes_in": bytes_in, "bytes_out": 0}
        both = sum(stored[FleetPartition(f"{tenant}_{topic}", p)] for p in (0, 1))
        expected[(tenant, sa, CONSUMER, topic)] = {"bytes_in": 0, "bytes_out": both}
    assert all(v["bytes_in"] + v["bytes_out"] > 0 for v in expected.values())

    def observed(records: dict[str, UsageRecord]) -> dict[Key, dict[str, int]]:
        sums = traffic(records)
        return {
            key: {"bytes_in": sums[key]["bytes_in"], "bytes_out": sums[key]["bytes_out"]}
            for key in expected
        }

    def metered() -> dict[str, UsageRecord] | None:
        found = usage_records(broker.bootstrap)
        return found if observed(found) == expected else None

    records = wait_until(metered, what=f"usage bytes {expected}", timeout=DEADLINE_S, interval=0.2)
    assert records
    # Nothing of the topic was metered under any other key (e.g. the other tenant's).
    topic_keys = {key for key in traffic(records) if key[3] == topic}
    assert topic_keys == set(expected)

    sums = traffic(records)
    for tenant in TENANTS:
        sa = principal(gateway_stack, tenant)
        for client_id in PRODUCERS:  # one produce request per flush, each of one topic
            assert sums[(tenant, sa, client_id, topic)]["requests"] == FLUSHES
        assert sums[(tenant, sa, CONSUMER, topic)]["requests"] >= 1  # its fetches
        for client_id in [*PRODUCERS, CONSUMER]:
            connection = sums[(tenant, sa, client_id, None)]
            assert connection["connection_ms"] > 0, (tenant, client_id)
            assert connection["requests"] > 0, (tenant, client_id)  # metadata and the like

    # Storage: a sample of every partition with the size the broker reports.
    def latest_samples(found: dict[str, UsageRecord]) -> dict[FleetPartition, int]:
        latest: dict[FleetPartition, StorageSample] = {}
        for record in found.values():
            if isinstance(record, StorageSample) and record.topic == topic:
                tp = FleetPartition(f"{record.tenant}_{record.topic}", record.partition)
                if tp not in latest or record.at_ms > latest[tp].at_ms:
                    latest[tp] = record
        return {tp: sample.bytes for tp, sample in latest.items()}

    wait_until(
        lambda: latest_samples(usage_records(broker.bootstrap)) == stored,
        what=f"storage samples {stored}",
        timeout=DEADLINE_S,
        interval=0.2,
    )


def test_sigterm_flushes_the_last_window(
    gateway_stack: GatewayStack, metered_topic: str, tmp_path: Path
) -> None:
    """A second gateway that would flush only once an hour: what it metered reaches `__usage`
    only through the flush its SIGTERM makes."""
    topic = metered_topic
    broker = gateway_stack.broker
    assert broker is not None
    settings = {
        **TEST_GATEWAY_SETTINGS,
        "usage.flush.interval.ms": "3600000",
        "gateway.id": "gw-sigterm",
    }
    second: GatewayProcess = start_gateway(
        tmp_path / "gateway",
        broker.bootstrap,
        gateway_stack.db_url,
        node_ids=[broker.node_id],
        properties=settings,
    )
    try:
        config: dict[str, Any] = {
            **gateway_stack.client_config("acme"),
            "bootstrap.servers": second.bootstrap,
            "client.id": "meter-term",
            "acks": "all",
        }
        producer = Producer(config)
        for i in range(100):
            producer.produce(topic, os.urandom(200), f"term-{i}".encode(), partition=0)
        assert producer.flush(30) == 0
        stopping_ms = time.time_ns() // 1_000_000
        assert second.stop() == 0
    finally:
        second.kill()
    sa = principal(gateway_stack, "acme")
    key = ("acme", sa, "meter-term", topic)
    stored = batch_bytes(broker.bootstrap, [FleetPartition(f"acme_{topic}", 0)])
    expected = stored[FleetPartition(f"acme_{topic}", 0)]

    def flushed() -> dict[str, UsageRecord] | None:
        found = usage_records(broker.bootstrap)
        return found if traffic(found)[key]["bytes_in"] == expected else None

    records = wait_until(
        flushed, what=f"the stop's flush of {expected} bytes", timeout=DEADLINE_S, interval=0.2
    )
    assert records
    mine = [
        r
        for r in records.values()
        if isinstance(r, TrafficRecord) and r.id.startswith("gw-sigterm/")
    ]
    assert traffic(records)[key]["bytes_in"] == expected
    assert traffic(records)[key]["requests"] >= 1
    assert traffic(records)[("acme", sa, "meter-term", None)]["connection_ms"] > 0
    # Cut by the stop: the window the gateway was in when it got SIGTERM.
    assert mine and max(r.end_ms for r in mine) >= stopping_ms
