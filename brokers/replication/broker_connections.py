"""Inter-broker connections for requests a broker sends on its own (transaction markers, KIP-890
verification): one `BrokerConnection` per broker, found through the metadata cache's inter-broker
endpoints.

Owns: `BrokerConnections` — a connection per broker, reused by every request sent there (requests
are pipelined), dropped on a failure and reopened by the next send, or when the broker's address
changed. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from brokers.client.config import ClientConfig
from brokers.client.connection import BrokerConnection
from brokers.client.errors import BrokerConnectionError
from brokers.replication.metadata_cache import BrokerEndpoint


class BrokerEndpoints(Protocol):
    def inter_broker_endpoint(self, node_id: int) -> BrokerEndpoint | None: ...


class BrokerConnections:
    """One `BrokerConnection` per broker, reused and reopened after a failure."""

    def __init__(self, metadata: BrokerEndpoints, config: ClientConfig) -> None:
        self._metadata = metadata
        self._config = config
        self._connections: dict[int, BrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def send(self, broker_id: int, request: Any) -> Any:
        """`request` to `broker_id`, its answer. Raises BrokerConnectionError when the broker
        cannot be reached or answered nothing (the connection is then dropped)."""
        connection = await self._connection(broker_id)
        try:
            return await connection.send(request)
        except BrokerConnectionError:
            self._drop(broker_id, connection)
            raise

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
