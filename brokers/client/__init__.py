"""The project's own asyncio Kafka client (followers, the controller, the gateway, billing, tools).

Layers, bottom up: `protocol` (sans-I/O framing and correlation), `connection` (one socket,
pipelined requests, ApiVersions negotiation), `cluster` (bootstrap, metadata, leaders,
coordinators, retries), then one module per operation family (`producer`, `consumer`, `offsets`,
`topics`, `groups`, `group_offsets`, `offset_reset`) and the `Admin` facade. Imports only
`brokers.wire` and `brokers.records` of ours. Everything runs on one event loop; not thread-safe.
"""

from brokers.client.admin import Admin
from brokers.client.cluster import Cluster
from brokers.client.config import ClientConfig
from brokers.client.connection import BrokerConnection
from brokers.client.errors import (
    BrokerConnectionError,
    BrokerResponseError,
    ClientError,
    UnknownTopicError,
)
from brokers.client.idempotent_producer import IdempotentProducer
from brokers.client.metadata import TopicPartition

__all__ = [
    "Admin",
    "BrokerConnection",
    "BrokerConnectionError",
    "BrokerResponseError",
    "ClientConfig",
    "ClientError",
    "Cluster",
    "IdempotentProducer",
    "TopicPartition",
    "UnknownTopicError",
]
