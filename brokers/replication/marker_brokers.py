"""The channel's connections to remote leaders, and WriteTxnMarkers (key 27) on the wire.

Owns: `RemoteBrokers` — markers sent over `BrokerConnections` (one reused connection per
broker, reopened after a failure or an address change) — and the request and answer of
WriteTxnMarkers at a fixed version, as Kafka's inter-broker protocol fixes it (the client's
negotiated APIs do not list it). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from typing import Any

from brokers.client.config import ClientConfig
from brokers.client.messages import make, request_module
from brokers.replication.broker_connections import BrokerConnections, BrokerEndpoints
from brokers.replication.local_markers import DEFAULT_MARKER_TIMEOUT_S
from brokers.replication.marker_request import MarkerErrors, MarkerRequest
from brokers.wire.errors import ErrorCode

WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 1
# The channel's requests outlive the leader's own wait, so a slow ISR answers REQUEST_TIMED_OUT
# (retried) rather than looking like a dead connection.
CHANNEL_CLIENT_CONFIG = ClientConfig(
    client_id="pier-txn-markers", request_timeout_s=DEFAULT_MARKER_TIMEOUT_S + 10.0
)


class RemoteBrokers:
    """WriteTxnMarkers to remote leaders over the shared per-broker connections."""

    def __init__(self, metadata: BrokerEndpoints, config: ClientConfig) -> None:
        self._connections = BrokerConnections(metadata, config)

    async def write(self, broker_id: int, marker: MarkerRequest) -> MarkerErrors:
        """Send one WriteTxnMarkers request to `broker_id`; per-partition codes.
        Raises BrokerConnectionError when the broker cannot be reached or answered nothing."""
        response = await self._connections.send(broker_id, _request(marker))
        return _answers(response, marker.producer_id)

    async def close(self) -> None:
        await self._connections.close()


def _request(marker: MarkerRequest) -> Any:
    module = request_module(WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION)
    by_topic: dict[str, list[int]] = {}
    for topic, index in marker.partitions:
        by_topic.setdefault(topic, []).append(index)
    entry = make(
        module,
        "WritableTxnMarker",
        producer_id=marker.producer_id,
        producer_epoch=marker.producer_epoch,
        transaction_result=marker.commit,
        coordinator_epoch=marker.coordinator_epoch,
        topics=tuple(
            make(module, "WritableTxnMarkerTopic", name=name, partition_indexes=tuple(indexes))
            for name, indexes in by_topic.items()
        ),
    )
    return make(module, "WriteTxnMarkersRequest", markers=(entry,))


def _answers(response: Any, producer_id: int) -> MarkerErrors:
    out: MarkerErrors = {}
    for result in response.markers:
        if result.producer_id != producer_id:
            continue
        for topic in result.topics:
            for p in topic.partitions:
                out[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
    return out
