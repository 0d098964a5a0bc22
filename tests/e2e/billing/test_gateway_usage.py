"""Real traffic through the gateway, metered to `__usage` by the gateway itself, then rolled up by
`pier billing run`: the rollups equal totals computed from `__usage` read independently (another
client, librdkafka, decoding with the usage contract)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tenancy.usage import USAGE_TOPIC, StorageSample, UsageRecord, decode
from tests.gateway_stack import GatewayStack
from tests.integration.billing.helpers import merge, rollups
from tests.integration.billing.test_cli import pier
from tests.integration.billing.usage_gen import storage_totals, traffic_totals
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
STORAGE_SAMPLES = 3


def _read_usage(bootstrap: str) -> list[UsageRecord]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(USAGE_TOPIC, timeout=10).topics[USAGE_TOPIC].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(USAGE_TOPIC, p), timeout=10)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(USAGE_TOPIC, p, 0) for p in partitions])
        records: list[UsageRecord] = []
        seen = dict.fromkeys(partitions, 0)

        def at_ends() -> bool:
            for message in consumer.consume(500, timeout=1.0):
                if message.error() is not None:
                    raise KafkaException(message.error())
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                seen[partition] = offset + 1
                records.append(decode(message.key(), message.value()))
            return all(seen[p] >= ends[p] for p in partitions)

        wait_until(at_ends, what=f"{USAGE_TOPIC} read up to {ends}", timeout=60, interval=0)
        return records
    finally:
        consumer.close()


def storage_samples(bootstrap: str) -> int:
    return sum(isinstance(record, StorageSample) for record in _read_usage(bootstrap))


def test_traffic_through_the_gateway_is_billed_as_metered(tmp_path: Path) -> None:
    with GatewayStack(tmp_path / "stack") as stack:
        producer = Producer(stack.client_config("acme", "PLAIN", acks="all"))
        for i in range(300):
            producer.produce("orders", f"value-{i}".encode() * 10, f"key-{i}".encode())
        assert producer.flush(30) == 0
        assert stack.gateway is not None and stack.broker is not None
        bootstrap = stack.broker.bootstrap
        wait_until(  # a few storage samples (one a second in the test settings)
            lambda: storage_samples(bootstrap) >= STORAGE_SAMPLES,
            what=f"{STORAGE_SAMPLES} storage samples in {USAGE_TOPIC}",
            timeout=30,
            interval=0.5,
        )
        stack.gateway.stop()  # flushes the last usage window
        stack.gateway = None
        usage = _read_usage(bootstrap)
        until = int(time.time() * 1000) + 3_600_000
        done = pier(
            "billing", "run", "--db", stack.db_url, "--bootstrap", bootstrap,
            "--sample-interval", "1s", "--until", str(until),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        expected = merge(traffic_totals(usage), storage_totals(usage, 1000, until))
        assert rollups(stack.db_url) == expected
    produced = sum(
        v.get("bytes_in", 0) for k, v in expected.items() if k[0] == "acme" and k[3] == "orders"
    )
    assert produced > 300 * 10 * 6  # record batches as sent: at least the values' bytes
