"""A client's view of a cluster: bootstrap, metadata, one connection per broker, leaders and
group coordinators, and retries.

Owns: `Cluster`. Connections are opened lazily, keyed by broker address, and reused; a closed one
is replaced on next use. Metadata is fetched for all topics (never auto-creating one) and kept
until a retriable error says it is stale; `topics_metadata` asks for some topics only and updates
those in what is kept. Group coordinators come from FindCoordinator (v0–3
single key; v4+ batched keys, KIP-699) and are forgotten on NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE, as Kafka's clients do; at most `MAX_KNOWN_COORDINATORS` are kept, the
least recently used going first (the gateway's HTTP API asks for groups a tenant names in a URL,
any number of them). `call` runs an operation with the configured
retries and backoff. Runs on one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from brokers.client.config import ClientConfig
from brokers.client.connection import BrokerConnection
from brokers.client.errors import (
    BrokerConnectionError,
    BrokerResponseError,
    ClientConfigError,
    ClientError,
    NoLeaderError,
    UnsupportedVersionError,
    check,
)
from brokers.client.messages import make, request_module
from brokers.client.metadata import (
    BrokerAddress,
    ClusterMetadata,
    TopicPartition,
    metadata_request,
    parse_metadata,
)
from brokers.client.retry import Backoff, Sleep, retrying
from brokers.client.versions import ApiKey
from brokers.wire.errors import ErrorCode

T = TypeVar("T")
Connector = Callable[[str, int, ClientConfig], Awaitable[BrokerConnection]]
GROUP_KEY_TYPE = 0
MAX_KNOWN_COORDINATORS = 1024
FIRST_METADATA_BY_ID = 12  # Metadata looks topics up by id from v12 (KIP-516)
_COORDINATOR_MOVED = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})


def parse_bootstrap(bootstrap: str | Sequence[str]) -> list[tuple[str, int]]:
    """ "host:port[,host:port…]" (or a list of them) → addresses; ClientConfigError if malformed."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    addresses = []
    for item in (i.strip() for i in items):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ClientConfigError(f"bootstrap address {item!r} is not host:port")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ClientConfigError("no bootstrap address")
    return addresses


class Cluster:
    def __init__(
        self,
        bootstrap: str | Sequence[str],
        config: ClientConfig | None = None,
        *,
        sleep: Sleep = asyncio.sleep,
        connector: Connector = BrokerConnection.connect,
    ) -> None:
        """`sleep` (retry backoff) and `connector` (opening a connection) are injectable."""
        self.config = config or ClientConfig()
        self._connector = connector
        self._bootstrap = parse_bootstrap(bootstrap)
        self._sleep = sleep
        self._backoff = Backoff(self.config.retry_backoff_s, self.config.retry_backoff_max_s)
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._connecting = asyncio.Lock()
        self._metadata: ClusterMetadata | None = None
        self._coordinators: OrderedDict[str, BrokerAddress] = OrderedDict()

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.aclose()

    async def call(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Run `operation`, retrying retriable errors with backoff after dropping stale state."""
        return await retrying(
            operation,
            retries=self.config.retries,
            backoff=self._backoff,
            sleep=self._sleep,
            on_retriable=self._forget,
        )

    # -- connections ----------------------------------------------------------------------------
    async def connect(self, host: str, port: int) -> BrokerConnection:
        async with self._connecting:
            existing = self._connections.get((host, port))
            if existing is not None and not existing.closed:
                return existing
            connection = await self._connector(host, port, self.config)
            self._connections[(host, port)] = connection
            return connection

    async def any_connection(self) -> BrokerConnection:
        """An open connection to some broker: an existing one, else a known broker or bootstrap."""
        for connection in self._connections.values():
            if not connection.closed:
                return connection
        known = (
            [(b.host, b.port) for b in self._metadata.brokers.values()] if self._metadata else []
        )
        failures = []
        for host, port in [*known, *self._bootstrap]:
            try:
                return await self.connect(host, port)
            except BrokerConnectionError as exc:
                failures.append(str(exc))
        raise BrokerConnectionError("no broker reachable: " + "; ".join(failures))

    async def node(self, node_id: int) -> BrokerConnection:
        metadata = await self.metadata()
        address = metadata.brokers.get(node_id)
        if address is None:
            metadata = await self.metadata(refresh=True)
            address = metadata.brokers.get(node_id)
        if address is None:
            raise NoLeaderError(f"broker {node_id} is not in the cluster metadata")
        return await self.connect(address.host, address.port)

    # -- metadata -------------------------------------------------------------------------------
    async def metadata(self, *, refresh: bool = False) -> ClusterMetadata:
        if self._metadata is None or refresh:
            connection = await self.any_connection()
            request = metadata_request(connection.version(ApiKey.METADATA), None)
            self._metadata = parse_metadata(await connection.send(request))
        return self._metadata

    async def topics_metadata(
        self, names: Sequence[str] = (), ids: Sequence[uuid.UUID] = ()
    ) -> ClusterMetadata:
        """Fresh metadata of the named topics and ids alone (never creating one): it costs what
        they hold, not the whole cluster. What it learns replaces those topics in the kept
        metadata (a topic answered unknown leaves it). Ids need Metadata v12
        (UnsupportedVersionError before)."""
        connection = await self.any_connection()
        version = min(connection.version(ApiKey.METADATA), FIRST_METADATA_BY_ID)
        if ids and version < FIRST_METADATA_BY_ID:
            raise UnsupportedVersionError(f"Metadata v{version} cannot look topics up by id")
        request = metadata_request(version, list(names), topic_ids=list(ids))
        found = parse_metadata(await connection.send(request))
        if self._metadata is not None:
            topics = dict(self._metadata.topics)
            for name, info in found.topics.items():
                if info.partitions:
                    topics[name] = info
                else:
                    topics.pop(name, None)
            self._metadata = dataclasses.replace(self._metadata, topics=topics)
        return found

    async def leader(self, tp: TopicPartition) -> BrokerConnection:
        metadata = await self.metadata()
        known = metadata.topics.get(tp.topic)
        if known is None or tp.partition not in known.partitions:  # new topic or partitions
            metadata = await self.metadata(refresh=True)
        address = metadata.leader(tp)
        return await self.connect(address.host, address.port)

    async def controller(self) -> BrokerConnection:
        """The controller (CreateTopics/DeleteTopics go there), or any broker if none is named."""
        metadata = await self.metadata()
        if metadata.controller_id in metadata.brokers:
            return await self.node(metadata.controller_id)
        return await self.any_connection()

    async def coordinator(self, group_id: str) -> BrokerConnection:
        address = self._coordinators.get(group_id)
        if address is None:
            address = await self._find_coordinator(group_id)
            self._coordinators[group_id] = address
            if len(self._coordinators) > MAX_KNOWN_COORDINATORS:
                self._coordinators.popitem(last=False)
        else:
            self._coordinators.move_to_end(group_id)
        return await self.connect(address.host, address.port)

    async def _find_coordinator(self, group_id: str) -> BrokerAddress:
        connection = await self.any_connection()
        version = connection.version(ApiKey.FIND_COORDINATOR)
        module = request_module(ApiKey.FIND_COORDINATOR, version)
        request = make(
            module,
            "FindCoordinatorRequest",
            key=group_id,
            key_type=GROUP_KEY_TYPE,
            coordinator_keys=(group_id,),
        )
        response: Any = await connection.send(request)
        found = response.coordinators[0] if version >= 4 else response
        check(found.error_code, f"group {group_id}", getattr(found, "error_message", None))
        return BrokerAddress(int(found.node_id), found.host, int(found.port))

    def _forget(self, error: ClientError) -> None:
        if isinstance(error, BrokerResponseError) and error.code in _COORDINATOR_MOVED:
            self._coordinators.clear()
        elif isinstance(error, BrokerConnectionError):
            self._coordinators.clear()
            self._metadata = None
        else:  # NOT_LEADER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, no leader, …
            self._metadata = None
