"""The channel's connections to remote leaders, and WriteTxnMarkers (key 27) on the wire.

Owns: `RemoteBrokers` — one `BrokerConnection` per broker, found through the metadata cache's
inter-broker endpoints, reused by every marker sent there (requests are pipelined), dropped on a
failure and reopened by the next send, or when the broker's address changed — and the request
and answer of WriteTxnMarkers at a fixed version, as Kafka's inter-broker protocol fixes it (the
client's negotiated APIs do not list it). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from brokers.client.config import ClientConfig
from brokers.client.connection import BrokerConnection
from brokers.client.errors import BrokerConnectionError
from brokers.client.messages import make, request_module
from brokers.replication.local_markers import DEFAULT_MARKER_TIMEOUT_S
from brokers.replication.marker_request import MarkerErrors, MarkerRequest
from brokers.replication.metadata_cache import BrokerEndpoint
from brokers.wire.errors import ErrorCode

WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 1
# The channel's requests outlive the leader's own wait, so a slow ISR answers REQUEST_TIMED_OUT
# (retried) rather than looking like a dead connection.
CHANNEL_CLIENT_CONFIG = ClientConfig(
    client_id="pier-txn-markers", request_timeout_s=DEFAULT_MARKER_TIMEOUT_S + 10.0
)


class BrokerEndpoints(Protocol):
    def inter_broker_endpoint(self, node_id: int) -> BrokerEndpoint | None: ...


class RemoteBrokers:
    """One `BrokerConnection` per remote broker, reused and reopened after a failure."""

    def __init__(self, metadata: BrokerEndpoints, config: ClientConfig) -> None:
        self._metadata = metadata
        self._config = config
        self._connections: dict[int, BrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def write(self, broker_id: int, marker: MarkerRequest) -> MarkerErrors:
        """Send one WriteTxnMarkers request to `broker_id`; per-partition codes.
        Raises BrokerConnectionError when the broker cannot be reached or answered nothing."""
        connection = await self._connection(broker_id)
        try:
            response = await connection.send(_request(marker))
        except BrokerConnectionError:
            self._drop(broker_id, connection)
            raise
        return _answers(response, marker.producer_id)

    async def _connection(self, broker_id: int) -> BrokerConnection:
        lock = self._locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            endpoint = self._metadata.inter_broker_endpoint(broker_id)
            if endpoint is None:
                raise BrokerConnectionError(f"broker {broker_id} is not in the metadata cache")
            address = f"{endpoint.host}:{endpoint.port}"
            current = self._connections.get(broker_id)
            if current is not None and not current.closed and current.address == address:
                return current
            if current is not None:
                await current.aclose()
            connection = await BrokerConnection.connect(endpoint.host, endpoint.port, self._config)
            self._connections[broker_id] = connection
            return connection

    def _drop(self, broker_id: int, connection: BrokerConnection) -> None:
        connection.close()
        if self._connections.get(broker_id) is connection:
            del self._connections[broker_id]

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.aclose()


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
