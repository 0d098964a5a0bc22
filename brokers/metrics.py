"""Broker-level Prometheus metrics named after Kafka's MBeans (BrokerTopicMetrics, Log).

Owns: bytes in/out and messages in per topic, failed produce/fetch counts, and a collector that
reports log size per partition on scrape (no bookkeeping on the hot path). Counters are
prometheus-client objects (thread-safe); the collector reads partition state from the metrics
thread, which only reads ints (a scrape may see a value one append old).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


class BrokerTopicMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytes_in",
            "Record bytes appended by producers (BytesInPerSec).",
            ["topic"],
            registry=registry,
        )
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytes_out",
            "Record bytes sent to consumers (BytesOutPerSec).",
            ["topic"],
            registry=registry,
        )
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messages_in",
            "Records appended (MessagesInPerSec).",
            ["topic"],
            registry=registry,
        )
        self.failed_produce = Counter(
            "kafka_server_brokertopicmetrics_failed_produce_requests",
            "Partition produce requests that failed (FailedProduceRequestsPerSec).",
            ["topic"],
            registry=registry,
        )
        self.failed_fetch = Counter(
            "kafka_server_brokertopicmetrics_failed_fetch_requests",
            "Partition fetch requests that failed (FailedFetchRequestsPerSec).",
            ["topic"],
            registry=registry,
        )


LogSizes = Callable[[], Iterable[tuple[str, int, int]]]


class LogSizeCollector(Collector):
    """kafka_log_log_size{topic,partition}: bytes on disk, computed at scrape time."""

    def __init__(self, sizes: LogSizes) -> None:
        self._sizes = sizes

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "kafka_log_log_size",
            "Partition log size in bytes (Log Size).",
            labels=["topic", "partition"],
        )
        for topic, partition, size in self._sizes():
            family.add_metric([topic, str(partition)], size)
        yield family


class CleanerCollector(Collector):
    """The log cleaner's figures (Kafka's kafka.log:type=LogCleaner/LogCleanerManager), read on scrape."""

    def __init__(self, cleaner: Any) -> None:
        self._cleaner = cleaner

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        metrics = self._cleaner.metrics
        yield CounterMetricFamily(
            "kafka_log_logcleaner_bytes_read",
            "Bytes read by cleaning passes.",
            value=metrics.bytes_read,
        )
        yield CounterMetricFamily(
            "kafka_log_logcleaner_bytes_written", "Bytes written by cleaning passes.",
            value=metrics.bytes_written,
        )  # fmt: skip
        yield CounterMetricFamily(
            "kafka_log_logcleaner_records_removed", "Records dropped by compaction.",
            value=metrics.records_removed,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "kafka_log_logcleaner_cleaner_recopy_percent", "Share of bytes rewritten in the last pass.",
            value=100 * metrics.last_recopy_ratio,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "kafka_log_logcleaner_max_clean_time_secs", "Duration of the last cleaning pass.",
            value=metrics.last_round_ms / 1000,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "kafka_log_logcleanermanager_uncleanable_partitions_count",
            "Partitions the cleaner gave up on after an error.",
            value=len(self._cleaner.manager.uncleanable),
        )
