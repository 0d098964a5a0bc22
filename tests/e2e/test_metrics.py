"""The Prometheus endpoint (`--metrics-port`) after real produce and consume traffic.

Metric names follow Kafka's MBeans (`BrokerTopicMetrics`, `RequestMetrics`, `Log`, socket server);
prometheus-client exposes counters with a `_total` suffix. Values are checked against what the
test did: records and bytes per topic, requests and a latency histogram per API, log size per
partition equal to the segment files on disk, and a connection gauge that follows open sockets.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping
from pathlib import Path

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from infra.stack import BrokerProcess, free_port
from tests.conftest import BrokerFactory
from tests.e2e.kafka_admin import create_topic, read_partitions
from tests.e2e.raw_wire import RawConnection
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e]

RECORDS, VALUE_SIZE, PARTITIONS = 2_000, 100, 2
Samples = Mapping[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(broker: BrokerProcess) -> Samples:
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    assert key in samples, f"no sample {name}{labels}; have {sorted({n for n, _ in samples})}"
    return samples[key]


@pytest.fixture
def metered(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(metrics_port=free_port())


def produce_and_consume(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for seq in range(RECORDS):
        producer.produce(topic, value=b"%0*d" % (VALUE_SIZE, seq), partition=seq % PARTITIONS)
    assert producer.flush(30) == 0
    records = read_partitions(broker.bootstrap, topic, dict.fromkeys(range(PARTITIONS), 0))
    assert len(records) == RECORDS


def test_topic_traffic_metrics(metered: BrokerProcess) -> None:
    produce_and_consume(metered, "metered")
    samples = scrape(metered)
    payload = RECORDS * VALUE_SIZE
    prefix = "kafka_server_brokertopicmetrics"
    assert value(samples, f"{prefix}_messages_in_total", topic="metered") == RECORDS
    bytes_in = value(samples, f"{prefix}_bytes_in_total", topic="metered")
    assert payload <= bytes_in < payload * 2, "bytes in should be the produced batch bytes"
    # Everything was read once (a refetch may add more, never less).
    assert value(samples, f"{prefix}_bytes_out_total", topic="metered") >= bytes_in


def test_request_metrics_per_api(metered: BrokerProcess) -> None:
    produce_and_consume(metered, "requests")
    samples = scrape(metered)
    for api in ("ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets"):
        count = value(samples, "kafka_network_requests_total", request=api)
        assert count >= 1, api
        histogram = "kafka_network_request_total_time_seconds"
        assert value(samples, f"{histogram}_count", request=api) == count, api
        assert value(samples, f"{histogram}_bucket", request=api, le="+Inf") == count, api
        assert 0 < value(samples, f"{histogram}_sum", request=api) < count * 5.0, api


def test_log_size_per_partition_matches_disk(metered: BrokerProcess) -> None:
    produce_and_consume(metered, "sized")
    samples = scrape(metered)
    for partition in range(PARTITIONS):
        on_disk = sum(p.stat().st_size for p in segment_files(metered.data_dir, "sized", partition))
        assert on_disk >= RECORDS // PARTITIONS * VALUE_SIZE
        assert (
            value(samples, "kafka_log_log_size", topic="sized", partition=str(partition)) == on_disk
        )


def segment_files(data_dir: Path, topic: str, partition: int) -> list[Path]:
    return list((data_dir / f"{topic}-{partition}").glob("*.log"))


def test_connection_count_follows_open_sockets(metered: BrokerProcess) -> None:
    gauge = "kafka_server_socket_server_connection_count"
    # Earlier tests' clients may still be closing: counting from a moving baseline was flaky.
    wait_until(
        lambda: value(scrape(metered), gauge) == 0,
        what="no connection left open by earlier tests",
        timeout=10,
    )
    baseline = 0
    connections = [RawConnection(metered.host, metered.port) for _ in range(3)]
    try:
        for connection in connections:
            connection.api_versions()  # accepted and served, so surely counted
        assert value(scrape(metered), gauge) == baseline + 3
    finally:
        for connection in connections:
            connection.close()
    wait_until(
        lambda: value(scrape(metered), gauge) == baseline,
        what="connection gauge back to its baseline",
        timeout=10,
    )
