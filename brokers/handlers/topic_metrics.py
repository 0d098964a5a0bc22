"""Per-topic traffic counters named after Kafka's `kafka.server:type=BrokerTopicMetrics` MBeans.

Owns: bytes in/out and messages in per topic, failed produce/fetch counts, and (as Kafka, for all
topics only) the bytes sent to followers, counted by the produce and fetch handlers.
prometheus-client counters: thread-safe.
"""

from __future__ import annotations

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
