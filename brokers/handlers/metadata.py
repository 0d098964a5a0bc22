"""Metadata (key 3): brokers, controller, cluster id, and per topic its partitions and leaders.

Auto-creates requested topics when both the client (v4+) and `auto.create.topics.enable` allow it,
as Kafka does. The answer is written straight from the metadata cache
(`brokers.wire.metadata_response`): kio's dataclasses cost ~7 µs a partition, and a full answer
names every partition of the cluster. A requested name `<prefix>*` asks for every topic whose name
starts with `<prefix>` (a Pier extension: `*` is never part of a legal topic name, so to Kafka such
a request could only be INVALID_TOPIC_EXCEPTION): the gateway asks for one tenant's topics this
way, so a tenant's all-topics request costs the brokers and the gateway what that tenant holds,
not the whole fleet. A large answer is written `SLICE_PARTITIONS` partitions a turn of the loop,
other requests served in between: each partition as it is when its slice is written (the topics
named are fixed when the request is read). Runs on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from brokers.common.config import BrokerConfig
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import MetadataView, TopicAdmin
from brokers.replication.errors import TopicExistsError
from brokers.replication.metadata_cache import PartitionMetadata, TopicMetadata
from brokers.replication.topic_names import validate_topic_name
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode
from brokers.wire.metadata_response import (
    PREFIX_WILDCARD,
    MetadataBroker,
    MetadataTopic,
    PartitionRow,
    encode_metadata_head,
    encode_metadata_tail,
    encode_metadata_topics,
)

API_KEY = 3
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs (bits of AclOperation)
MAX_VERSION = 13  # v13 (KIP-1102): a top-level error code, none here
ALL_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
# Partitions written per turn of the loop (~0.45 ms here): an answer naming every partition of
# the cluster (1.8 ms for 1,000) otherwise held every other client of the broker that long.
SLICE_PARTITIONS = 256


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    config: BrokerConfig
    metadata: MetadataView
    topics: TopicAdmin


def route(config: BrokerConfig, metadata: MetadataView, topics: TopicAdmin) -> Route:
    broker = _Services(config, metadata, topics)

    async def handle(ctx: RequestContext, request: Any) -> bytes:
        wants_ops = bool(getattr(request, "include_topic_authorized_operations", False))
        version = ctx.api_version
        requested = _requested(broker, ctx, request)
        live = broker.metadata.brokers
        head = encode_metadata_head(
            version,
            throttle_ms=0,
            brokers=[MetadataBroker(b.node_id, b.host, b.port, b.rack) for b in live.values()],
            cluster_id=broker.metadata.cluster_id or None,  # none before joining
            controller_id=broker.metadata.controller_id,
            topic_count=len(requested),
        )
        parts = [head]
        for first, last in _slices(requested):
            if first:  # let other clients' requests run between slices of a large answer
                await asyncio.sleep(0)
                live = broker.metadata.brokers
            topics = [
                _topic(name, meta, error, wants_ops, live)
                for name, meta, error in requested[first:last]
            ]
            parts.append(encode_metadata_topics(version, topics))
        parts.append(encode_metadata_tail(version, AUTHORIZED_OPERATIONS_OMITTED))
        return b"".join(parts)

    return Route(API_KEY, 0, MAX_VERSION, handle, name="Metadata")


def _slices(
    requested: Sequence[tuple[str | None, TopicMetadata | None, ErrorCode]],
) -> Iterator[tuple[int, int]]:
    """[first, last) ranges of `requested` of about `SLICE_PARTITIONS` partitions each (whole
    topics; an answer within one slice is written at once)."""
    first, partitions = 0, 0
    for at, (_name, meta, _error) in enumerate(requested):
        partitions += len(meta.partitions) if meta is not None else 0
        if partitions >= SLICE_PARTITIONS:
            yield first, at + 1
            first, partitions = at + 1, 0
    if first < len(requested) or not requested:
        yield first, len(requested)


def _requested(
    broker: _Services, ctx: RequestContext, request: Any
) -> list[tuple[str | None, TopicMetadata | None, ErrorCode]]:
    cache = broker.metadata
    wanted = request.topics
    if wanted is None or (ctx.api_version == 0 and not wanted):
        return [(t.name, t, ErrorCode.none) for t in cache.topics.values()]
    allow_create = bool(getattr(request, "allow_auto_topic_creation", True))
    result: list[tuple[str | None, TopicMetadata | None, ErrorCode]] = []
    for item in wanted:
        name = item.name
        if name and name.endswith(PREFIX_WILDCARD):
            prefix = name[: -len(PREFIX_WILDCARD)]
            result += [(t.name, t, ErrorCode.none) for t in cache.topics_with_prefix(prefix)]
            continue
        topic_id = getattr(item, "topic_id", None)
        # By id when an id is given without a name: Kafka's Java client leaves the name "" then.
        if not name and topic_id is not None and topic_id.int != 0:
            meta = cache.topic_by_id(item.topic_id)
            error = ErrorCode.none if meta else ErrorCode.unknown_topic_id
            result.append((meta.name if meta else None, meta, error))
            continue
        result.append(_by_name(broker, name or "", allow_create))
    return result


def _by_name(
    broker: _Services, name: str, allow_create: bool
) -> tuple[str | None, TopicMetadata | None, ErrorCode]:
    meta = broker.metadata.topic(name)
    if meta is not None:
        return name, meta, ErrorCode.none
    try:
        validate_topic_name(name)
    except Exception as exc:
        return name, None, error_code_for(exc)
    if not (allow_create and broker.config.auto_create_topics) or name.startswith("__"):
        return name, None, ErrorCode.unknown_topic_or_partition
    try:
        created = broker.topics.create_topic(name, -1, -1, {})
    except TopicExistsError:  # another broker created it; its metadata is on its way (Kafka:
        return name, None, ErrorCode.leader_not_available  # retriable, not TOPIC_ALREADY_EXISTS)
    except Exception as exc:
        return name, None, error_code_for(exc)
    return name, created, ErrorCode.none


def partition_row(p: PartitionMetadata, live: Mapping[int, Any]) -> PartitionRow:
    """A partition as Metadata and DescribeTopicPartitions answer it. As Kafka's metadata cache:
    a leader that is not a live broker (or -1: offline, no eligible replica) is
    LEADER_NOT_AVAILABLE with leader -1, so clients wait."""
    leads = p.leader in live
    return PartitionRow(
        ErrorCode.none if leads else ErrorCode.leader_not_available,
        p.index,
        p.leader if leads else -1,
        p.leader_epoch,
        p.replicas,
        p.isr,
        p.offline_replicas,
    )


def partition_state(p: PartitionMetadata, live: Mapping[int, Any]) -> dict[str, Any]:
    """`partition_row` as kio's partition fields (DescribeTopicPartitions)."""
    row = partition_row(p, live)
    return {
        "error_code": row.error_code,
        "partition_index": row.partition_index,
        "leader_id": row.leader,
        "leader_epoch": row.leader_epoch,
        "replica_nodes": tuple(row.replicas),
        "isr_nodes": tuple(row.isr),
        "offline_replicas": tuple(row.offline_replicas),
    }


def _topic(
    name: str | None,
    meta: TopicMetadata | None,
    error: ErrorCode,
    wants_ops: bool,
    live: Mapping[int, Any],
) -> MetadataTopic:
    rows: list[PartitionRow] = []
    if meta is not None:
        rows = [partition_row(p, live) for p in sorted(meta.partitions.values(), key=_index)]
    return MetadataTopic(
        error,
        name,
        meta.topic_id if meta else None,
        bool(meta and meta.is_internal),
        rows,
        ALL_TOPIC_OPERATIONS if wants_ops else AUTHORIZED_OPERATIONS_OMITTED,
    )


def _index(partition: PartitionMetadata) -> int:
    return partition.index
