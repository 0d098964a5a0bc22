"""Prometheus metrics of the remote tier, named after Kafka's RemoteStorage metrics
(kafka.server:type=BrokerTopicMetrics,name=RemoteCopyBytesPerSec, RemoteCopyErrorsPerSec,
RemoteFetchBytesPerSec, RemoteFetchRequestsPerSec, RemoteFetchErrorsPerSec,
RemoteDeleteRequestsPerSec, RemoteDeleteErrorsPerSec, RemoteCopyLagBytes/Segments), per topic as
Kafka's are, in the exporter style of brokers/handlers/topic_metrics.py: RemoteCopyErrorsPerSec is
`kafka_server_brokertopicmetrics_remote_copy_errors_total`, RemoteCopyLagBytes is the gauge
`kafka_server_brokertopicmetrics_remote_copy_lag_bytes`.

Owns: the counters and the copy-lag gauge (bytes and segments of closed local segments not yet
in the remote tier: when the store is down, these grow and local deletion waits), and dropping a
topic's series once its last partition here is deleted (`forget`, as topic_metrics does: topics
created and deleted all day would otherwise leave their series for good), and again at each run
of the remote task for every topic neither hosted here nor with remote segments left to delete
(`sweep`: a copy, read or delete that was under way when the topic went counts after `forget`).
Per-topic counts go through `count` and `record_lag`, which remember the topics that have series.
Thread-safe (prometheus_client); `count`, `record_lag`, `forget` and `sweep` run on the event
loop.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge

_PREFIX = "kafka_server_brokertopicmetrics_"


class RemoteStorageMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, what: str) -> Counter:
            return Counter(_PREFIX + name, what, ["topic"], registry=registry)

        def gauge(name: str, what: str) -> Gauge:
            return Gauge(_PREFIX + name, what, ["topic", "partition"], registry=registry)

        self.copy_bytes = counter("remote_copy_bytes", "Bytes copied to the remote tier.")
        self.copy_requests = counter("remote_copy_requests", "Segment copies started.")
        self.copy_errors = counter("remote_copy_errors", "Segment copies that failed.")
        self.fetch_bytes = counter("remote_fetch_bytes", "Bytes read from the remote tier.")
        self.fetch_requests = counter("remote_fetch_requests", "Reads from the remote tier.")
        self.fetch_errors = counter("remote_fetch_errors", "Remote reads that failed.")
        self.delete_requests = counter("remote_delete_requests", "Remote segment deletes.")
        self.delete_errors = counter("remote_delete_errors", "Remote deletes that failed.")
        self.copy_lag_bytes = gauge(
            "remote_copy_lag_bytes", "Bytes of closed local segments not yet copied."
        )
        self.copy_lag_segments = gauge(
            "remote_copy_lag_segments", "Closed local segments not yet copied."
        )
        self._counters = (
            self.copy_bytes, self.copy_requests, self.copy_errors, self.fetch_bytes,
            self.fetch_requests, self.fetch_errors, self.delete_requests, self.delete_errors,
        )  # fmt: skip
        self._lagging: dict[str, set[str]] = {}  # topic -> partitions with a copy-lag series
        self._counted: set[str] = set()  # topics with counter series

    def count(self, counter: Counter, topic: str, amount: float = 1.0) -> None:
        """Add `amount` to `counter`'s series of `topic` (one of this class's counters)."""
        self._counted.add(topic)
        counter.labels(topic).inc(amount)

    def record_lag(self, topic: str, partition: int, pending_bytes: int, segments: int) -> None:
        index = str(partition)
        self._lagging.setdefault(topic, set()).add(index)
        self.copy_lag_bytes.labels(topic, index).set(pending_bytes)
        self.copy_lag_segments.labels(topic, index).set(segments)

    def sweep(self, kept: set[str]) -> None:
        """Drop the series of every topic not in `kept`."""
        for topic in (self._counted | self._lagging.keys()) - kept:
            self.forget(topic)

    def forget(self, topic: str) -> None:
        """Drop every series of `topic` (its last partition here was deleted)."""
        self._counted.discard(topic)
        for counter in self._counters:
            with contextlib.suppress(KeyError):  # never counted for this topic
                counter.remove(topic)
        for index in self._lagging.pop(topic, ()):
            for gauge in (self.copy_lag_bytes, self.copy_lag_segments):
                with contextlib.suppress(KeyError):
                    gauge.remove(topic, index)
