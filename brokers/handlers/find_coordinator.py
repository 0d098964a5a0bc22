"""FindCoordinator (key 10, v0–6): which broker coordinates a group or a transactional id (v4+: a
batch of keys).

A group's coordinator is the leader of its `__consumer_offsets` partition, a transactional id's
(key type 1) the leader of its `__transaction_state` partition, as this broker's metadata cache
knows it (in ZooKeeper mode the controller's UpdateMetadata keeps it; the leader then learns it
leads from LeaderAndIsr and answers COORDINATOR_LOAD_IN_PROGRESS until its load ends). Asking
creates the internal topic on first use, as Kafka does; until the topic exists, while the
partition has no leader or its leader is not a live broker, and while too few brokers are alive
to create the topic, the answer is COORDINATOR_NOT_AVAILABLE, a retriable code. Other key types
(share groups) are INVALID_REQUEST. Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from brokers.coordinator.errors import GroupError
from brokers.coordinator.offsets_topic import OFFSETS_TOPIC
from brokers.coordinator.transactions import TRANSACTION_STATE_TOPIC
from brokers.coordinator.transactions.errors import TransactionError
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.services import GroupService, MetadataView, TransactionService
from brokers.log.errors import LogError
from brokers.replication.errors import ReplicationError
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 10
FIRST_BATCHED_VERSION = 4
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
_MESSAGES = {
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.invalid_request: "Unknown coordinator key type.",
}


@dataclass(frozen=True, slots=True)
class _Found:
    key: str
    error: ErrorCode
    node_id: int = -1
    host: str = ""
    port: int = -1


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    groups: GroupService
    transactions: TransactionService
    metadata: MetadataView


def route(groups: GroupService, metadata: MetadataView, transactions: TransactionService) -> Route:
    broker = _Services(groups, transactions, metadata)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
        if ctx.api_version < FIRST_BATCHED_VERSION:
            found = _find(broker, key_type, request.key)
            return make(
                module,
                "FindCoordinatorResponse",
                throttle_time=throttle(),
                error_code=found.error,
                error_message=_MESSAGES.get(found.error),
                node_id=found.node_id,
                host=found.host,
                port=found.port,
            )
        coordinators = tuple(
            make(
                module,
                "Coordinator",
                key=found.key,
                node_id=found.node_id,
                host=found.host,
                port=found.port,
                error_code=found.error,
                error_message=_MESSAGES.get(found.error),
            )
            for found in (_find(broker, key_type, key) for key in request.coordinator_keys)
        )
        return make(
            module, "FindCoordinatorResponse", throttle_time=throttle(), coordinators=coordinators
        )

    return Route(API_KEY, 0, 6, handle, name="FindCoordinator")


def _find(broker: _Services, key_type: int, key: str) -> _Found:
    if key_type == GROUP_KEY_TYPE:
        groups = broker.groups
        return _leader_of(broker, key, groups.topic.ensure_created, OFFSETS_TOPIC,
                          groups.coordinator.partition_for)  # fmt: skip
    if key_type == TRANSACTION_KEY_TYPE:
        txns = broker.transactions
        return _leader_of(broker, key, txns.topic.ensure_created, TRANSACTION_STATE_TOPIC,
                          txns.coordinator.partition_for)  # fmt: skip
    return _Found(key, ErrorCode.invalid_request)


def _leader_of(
    broker: _Services,
    key: str,
    ensure_created: Callable[[], None],
    topic: str,
    partition_for: Callable[[str], int],
) -> _Found:
    try:
        ensure_created()
    except (GroupError, TransactionError, ReplicationError, LogError, OSError):
        return _Found(key, ErrorCode.coordinator_not_available)  # e.g. too few brokers: retry
    partition = broker.metadata.partition(topic, partition_for(key))
    endpoint = None if partition is None else broker.metadata.brokers.get(partition.leader)
    if endpoint is None:
        return _Found(key, ErrorCode.coordinator_not_available)
    return _Found(key, ErrorCode.none, endpoint.node_id, endpoint.host, endpoint.port)
