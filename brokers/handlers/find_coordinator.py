"""FindCoordinator (key 10, v0–6): which broker coordinates a group (v4+: a batch of keys).

A group's coordinator is the leader of its `__consumer_offsets` partition as this broker's
metadata cache knows it (in ZooKeeper mode the controller's UpdateMetadata keeps it; the leader
then learns it leads from LeaderAndIsr and answers COORDINATOR_LOAD_IN_PROGRESS until its load
ends). Asking creates that topic on first use, as Kafka does; until the topic exists, while the
partition has no leader or its leader is not a live broker, and while too few brokers are alive to
create the topic, the answer is COORDINATOR_NOT_AVAILABLE, a retriable code. Other key types are
INVALID_REQUEST. Runs on the event loop.

Transaction coordinators (key type 1) are not built yet. A retriable code such as
COORDINATOR_NOT_AVAILABLE made clients spin (~10,000 lookups a second, never an error to the
application), so they answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) with a message saying
transactions are unavailable, until transactions land. 53 is the one code both main client
families treat as fatal here: librdkafka's transactional FindCoordinator handler raises a fatal
error only for it and CLUSTER_AUTHORIZATION_FAILED (anything else, UNSUPPORTED_VERSION included,
is retried), and the Java producer's TransactionManager fails fatally on it (as on every
non-retriable code). It is also what Kafka itself answers a client that may not use a
transactional id, so no client mistakes it for a transient state; CLUSTER_AUTHORIZATION_FAILED
would wrongly suggest a cluster-wide ACL problem. InitProducerId with a transactional id answers
the same code (see init_producer_id).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brokers.coordinator.errors import GroupError
from brokers.coordinator.offsets_topic import OFFSETS_TOPIC
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.services import GroupService, MetadataView
from brokers.log.errors import LogError
from brokers.replication.errors import ReplicationError
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 10
FIRST_BATCHED_VERSION = 4
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
TRANSACTIONS_UNAVAILABLE = (
    "Transactions are not available on this cluster: a transactional.id cannot be used "
    "(an idempotent producer can)."
)
_MESSAGES = {
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.invalid_request: "Unknown coordinator key type.",
    ErrorCode.transactional_id_authorization_failed: TRANSACTIONS_UNAVAILABLE,
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
    metadata: MetadataView


def route(groups: GroupService, metadata: MetadataView) -> Route:
    broker = _Services(groups, metadata)

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
    if key_type == TRANSACTION_KEY_TYPE:
        return _Found(key, ErrorCode.transactional_id_authorization_failed)  # see the docstring
    if key_type != GROUP_KEY_TYPE:
        return _Found(key, ErrorCode.invalid_request)
    wiring = broker.groups
    try:
        wiring.topic.ensure_created()
    except (GroupError, ReplicationError, LogError, OSError):
        return _Found(key, ErrorCode.coordinator_not_available)  # e.g. too few brokers: retry
    partition = broker.metadata.partition(OFFSETS_TOPIC, wiring.coordinator.partition_for(key))
    endpoint = None if partition is None else broker.metadata.brokers.get(partition.leader)
    if endpoint is None:
        return _Found(key, ErrorCode.coordinator_not_available)
    return _Found(key, ErrorCode.none, endpoint.node_id, endpoint.host, endpoint.port)
