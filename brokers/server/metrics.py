"""Prometheus metrics of the network layer, named after Kafka's `kafka.network` MBeans.

Owns: request counts, latency histograms per API, connection gauges, connections closed for
idleness, failed accepts, connections refused at `max.connections.per.ip` and the time the
acceptor waited at `max.connections`, the request memory in use (`queued.max.request.bytes`), and how late the
event loop runs (`pier_event_loop_lag_seconds`, Pier's own: `loop_health`). Metric objects live in a
registry passed in (tests use their own). prometheus-client is thread-safe.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class ServerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "kafka_network_requests",
            "Requests received, per API (RequestMetrics RequestsPerSec).",
            ["request"],
            registry=registry,
        )
        self.request_latency = Histogram(
            "kafka_network_request_total_time_seconds",
            "Time from reading a request to queueing its response (RequestMetrics TotalTimeMs).",
            ["request"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.connections = Gauge(
            "kafka_server_socket_server_connection_count",
            "Open client connections.",
            registry=registry,
        )
        self.connections_created = Counter(
            "kafka_server_socket_server_connections_created",
            "Connections accepted.",
            registry=registry,
        )
        self.connections_closed_malformed = Counter(
            "kafka_network_malformed_requests",
            "Connections closed because a request could not be parsed or routed.",
            registry=registry,
        )
        self.connections_closed_idle = Counter(
            "kafka_network_idle_connections_closed",
            "Connections closed after connections.max.idle.ms without progress from the client.",
            registry=registry,
        )
        self.accept_errors = Counter(
            "kafka_network_acceptor_errors",
            "Failed accepts on the listener, per errno (EMFILE: out of file descriptors).",
            ["errno"],
            registry=registry,
        )
        self.connections_refused = Counter(
            "kafka_network_connections_refused",
            "Connections closed right after accept, per cap (max.connections.per.ip).",
            ["reason"],
            registry=registry,
        )
        self.acceptor_blocked_seconds = Counter(
            "kafka_network_acceptor_blocked_seconds",
            "Time the acceptor waited at max.connections (SocketServer AcceptorBlockedPercent).",
            registry=registry,
        )
        self.memory_pool_used = Gauge(
            "kafka_network_socket_server_memory_pool_used_bytes",
            "Request bytes read but not yet processed (SocketServer MemoryPoolUsed).",
            registry=registry,
        )
        self.loop_lag = Histogram(
            "pier_event_loop_lag_seconds",
            "How late the event loop woke a 50 ms sleeper (synchronous work or no CPU).",
            buckets=_LAG_BUCKETS,
            registry=registry,
        )
