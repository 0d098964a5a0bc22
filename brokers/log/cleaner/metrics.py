"""The log cleaner's figures, named after Kafka's `kafka.log:type=LogCleaner` / `LogCleanerManager`.

Owns: a collector read on scrape from the cleaner's counters (the metrics thread reads ints only).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


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
