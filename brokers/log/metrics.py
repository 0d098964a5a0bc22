"""Log size per partition, named after Kafka's `kafka.log:type=Log,name=Size` MBean.

Owns: a collector that reports log size per partition on scrape (no bookkeeping on the hot
path). It runs on the metrics thread and only reads ints (a scrape may see a value one append old).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

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
