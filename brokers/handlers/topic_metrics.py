"""Per-topic traffic counters named after Kafka's `kafka.server:type=BrokerTopicMetrics` MBeans.

Owns: bytes in/out and messages in per topic, failed produce/fetch counts, and (as Kafka, for all
topics only) the bytes sent to followers, counted by the produce and fetch handlers. A topic's
series go when its last partition here is deleted (`forget`, as Kafka's removeMetrics): a tenant
creating, writing and deleting topics all day would otherwise grow the broker's memory and every
scrape without bound. For the same reason a failure is counted only for a partition this broker
has (Kafka counts no UnknownTopicOrPartition either): a Fetch or Produce naming topics that do
not exist, each up to 32 KiB, would otherwise make a series per name until a restart.
prometheus-client counters: thread-safe; the per-topic cache of `appended` and `forget` run on
the event loop.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter


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
        self.replication_bytes_out = Counter(
            "kafka_server_brokertopicmetrics_replication_bytes_out",
            "Record bytes sent to follower replicas (ReplicationBytesOutPerSec; all topics).",
            registry=registry,
        )
        self._per_topic = (
            self.bytes_in, self.bytes_out, self.messages_in, self.failed_produce, self.failed_fetch
        )  # fmt: skip
        # BytesIn/MessagesIn children per topic, found once (a label lookup takes a lock and
        # builds a key): what every Produce counts.
        self._in: dict[str, tuple[Counter, Counter]] = {}

    def appended(self, topic: str, size: int, records: int) -> None:
        """Count a request's appends to `topic` in its BytesIn and MessagesIn."""
        found = self._in.get(topic)
        if found is None:
            found = (self.bytes_in.labels(topic), self.messages_in.labels(topic))
            self._in[topic] = found
        found[0].inc(size)
        found[1].inc(records)

    def forget(self, topic: str) -> None:
        """Drop every series of `topic` (its last partition here was deleted)."""
        self._in.pop(topic, None)
        for counter in self._per_topic:
            with contextlib.suppress(KeyError):  # never counted for this topic
                counter.remove(topic)
