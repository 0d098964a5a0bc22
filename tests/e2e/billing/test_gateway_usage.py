"""Real traffic through the gateway, metered to `__usage` by the gateway itself, then rolled up by
`pier billing run`: the rollups equal totals computed from `__usage` read independently (another
client, librdkafka, decoding with the usage contract)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tenancy.usage import USAGE_TOPIC, decode
from tests.gateway_stack import GatewayStack
from tests.integration.billing.helpers import merge, rollups
from tests.integration.billing.test_cli import pier
from tests.integration.billing.usage_gen import storage_totals, traffic_totals

pytestmark = pytest.mark.e2e


def _read_usage(bootstrap: str) -> list[object]:
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
        records, seen = [], dict.fromkeys(partitions, 0)
        deadline = time.monotonic() + 60
        while any(seen[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None or message.error():
                continue
            seen[message.partition()] = message.offset() + 1
            records.append(decode(message.key(), message.value()))
        return records
    finally:
        consumer.close()


def test_traffic_through_the_gateway_is_billed_as_metered(tmp_path: Path) -> None:
    with GatewayStack(tmp_path / "stack") as stack:
        producer = Producer(stack.client_config("acme", "PLAIN", acks="all"))
        for i in range(300):
            producer.produce("orders", f"value-{i}".encode() * 10, f"key-{i}".encode())
        assert producer.flush(30) == 0
        time.sleep(3)  # a few storage samples (every second in the test settings)
        assert stack.gateway is not None and stack.broker is not None
        stack.gateway.stop()  # flushes the last usage window
        stack.gateway = None
        bootstrap = stack.broker.bootstrap
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
