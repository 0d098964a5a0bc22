"""UpdateMetadata (key 6): the controller refreshes this broker's view of the cluster.

Owns: fencing (stale controller or broker epoch → the top-level error, cache untouched) and
applying the request to `MetadataCache`: the live brokers are replaced by the request's list
(clients are served each broker's PLAINTEXT endpoint; its REPLICATION endpoint, when it has one,
goes to `inter_broker` for broker-to-broker use), the controller id is recorded, and each
partition state in it replaces the cached one. A partition whose leader is -2 (Kafka's
`LeaderDuringDelete`) is being deleted and leaves the cache, and its topic with its last
partition; the cache's deletion listeners hear of them (Kafka's onPartitionsDeleted). Topic
configs are kept. Serves Metadata and DescribeCluster on every broker, so clients re-route after
leadership moves. The cached
partitions' broker lists are interned (`_shared_list`, at most `SHARED_LISTS_MAX` distinct ones):
replica sets repeat across partitions, and one list each made 10,000 partitions cost ~2 MiB on
every broker (issue 25). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable

from brokers.controller import CLIENT_LISTENER, INTER_BROKER_LISTENER
from brokers.controller import control_api as rq
from brokers.handlers.control_fence import FENCED, BrokerFence
from brokers.handlers.control_requests import control_route
from brokers.handlers.errors import error_code_for
from brokers.replication.metadata_cache import (
    BrokerEndpoint,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

LEADER_DURING_DELETE = -2
SHARED_LISTS_MAX = 4096  # distinct broker lists interned; others get a list of their own
_shared_lists: dict[tuple[int, ...], list[int]] = {}


def _shared_list(nodes: Iterable[int]) -> list[int]:
    """The interned list of `nodes` (shared by every partition with the same brokers in the same
    order: readers never mutate the cache's lists in place, see metadata_cache)."""
    key = tuple(nodes)
    found = _shared_lists.get(key)
    if found is None:
        found = list(key)
        if len(_shared_lists) < SHARED_LISTS_MAX:
            _shared_lists[key] = found
    return found


def _endpoint(broker: rq.UpdateMetadataBroker, listener: str) -> BrokerEndpoint | None:
    """The broker's endpoint on `listener`, None if it has none there."""
    for e in broker.endpoints:
        if e.listener == listener:
            return BrokerEndpoint(broker.id, e.host, e.port, broker.rack)
    return None


def _client_endpoint(broker: rq.UpdateMetadataBroker) -> BrokerEndpoint:
    """PLAINTEXT when listed; else the first endpoint that is not the inter-broker one."""
    found = _endpoint(broker, CLIENT_LISTENER)
    if found is not None:
        return found
    e = next((e for e in broker.endpoints if e.listener != INTER_BROKER_LISTENER), None)
    e = e or broker.endpoints[0]
    return BrokerEndpoint(broker.id, e.host, e.port, broker.rack)


def apply(request: rq.UpdateMetadataRequest, metadata: MetadataCache) -> None:
    metadata.controller_id = request.controller_id
    live = [b for b in request.live_brokers if b.endpoints]
    # Clients get the PLAINTEXT listener; brokers reach each other on REPLICATION when listed.
    metadata.brokers = {b.id: _client_endpoint(b) for b in live}
    metadata.inter_broker = {
        b.id: endpoint for b in live if (endpoint := _endpoint(b, INTER_BROKER_LISTENER))
    }
    deleted: list[tuple[str, int]] = []
    placed = False  # a partition came, went or moved: the cache's replica counts are stale
    for topic in request.topic_states:
        cached = metadata.topics.get(topic.topic_name)
        if cached is None or (topic.topic_id is not None and cached.topic_id != topic.topic_id):
            if topic.topic_id is None:
                continue  # a topic first seen without an id cannot be served
            cached = TopicMetadata(topic.topic_name, topic.topic_id, {}, {})
            metadata.topics[topic.topic_name] = cached
        partitions = cached.partitions
        for p in topic.partition_states:
            if p.leader == LEADER_DURING_DELETE:
                if partitions.pop(p.partition_index, None) is not None:
                    deleted.append((topic.topic_name, p.partition_index))
                    placed = True
                continue
            replicas = _shared_list(p.replicas)
            before = partitions.get(p.partition_index)
            placed = placed or before is None or before.replicas != replicas
            partitions[p.partition_index] = PartitionMetadata(
                index=p.partition_index,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                replicas=replicas,
                isr=_shared_list(p.isr),
                offline_replicas=_shared_list(p.offline_replicas),
            )
        if not partitions:
            del metadata.topics[topic.topic_name]
    if placed:
        metadata.partition_changes += 1
    metadata.partitions_deleted(deleted)


def handle(
    request: rq.UpdateMetadataRequest, fence: BrokerFence, metadata: MetadataCache
) -> rq.UpdateMetadataResponse:
    try:
        fence.admit(request.controller_epoch, request.broker_epoch)
    except FENCED as exc:
        return rq.UpdateMetadataResponse(error_code=error_code_for(exc))
    apply(request, metadata)
    return rq.UpdateMetadataResponse(error_code=ErrorCode.none)


def route(fence: BrokerFence, metadata: MetadataCache) -> Route:
    return control_route(rq.UPDATE_METADATA, lambda r: handle(r, fence, metadata))
