"""Fetching record batches from partitions, by offset.

Owns: `FetchPosition`, `FetchedPartition`, `fetch_from` (one Fetch to one broker; per-partition
errors are returned, not raised, so a follower can act on each partition — and `replica_id` makes
it a replica fetch, reading up to the log end) and `fetch` (a consumer fetch grouped by leader,
raising partition errors and retrying retriable ones). Sessionless (KIP-227 session id 0, epoch
-1: full fetches). Records stay opaque bytes; they may end in a partial batch when the broker cut
the response at a size limit, which batch iteration must ignore. Runs on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from brokers.client.cluster import Cluster
from brokers.client.connection import BrokerConnection
from brokers.client.errors import check
from brokers.client.messages import make, millis, request_module
from brokers.client.metadata import TopicPartition
from brokers.client.versions import ApiKey
from brokers.wire.errors import ErrorCode

CONSUMER_REPLICA_ID = -1
FULL_FETCH_SESSION_EPOCH = -1
DEFAULT_MAX_BYTES = 50 * 1024 * 1024  # fetch.max.bytes
DEFAULT_PARTITION_MAX_BYTES = 1024 * 1024  # max.partition.fetch.bytes


@dataclass(frozen=True, slots=True)
class FetchPosition:
    offset: int
    current_leader_epoch: int = -1  # KIP-320 fencing; -1 skips the check
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # a follower's own log start (replica fetches)


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes
    aborted_transactions: tuple[tuple[int, int], ...]  # (producer id, first offset)


@dataclass(frozen=True, slots=True)
class FetchLimits:
    max_wait_s: float = 0.5
    min_bytes: int = 1
    max_bytes: int = DEFAULT_MAX_BYTES
    partition_max_bytes: int = DEFAULT_PARTITION_MAX_BYTES
    read_committed: bool = False


async def fetch_from(
    connection: BrokerConnection,
    positions: Mapping[TopicPartition, FetchPosition],
    limits: FetchLimits = FetchLimits(),
    *,
    replica_id: int = CONSUMER_REPLICA_ID,
) -> dict[TopicPartition, FetchedPartition]:
    version = connection.version(ApiKey.FETCH)
    request = fetch_request(version, positions, limits, replica_id)
    response = await connection.send(
        request, timeout_s=limits.max_wait_s + connection.request_timeout_s
    )
    check(getattr(response, "error_code", 0), f"fetch from {connection.address}")  # v7+
    return {
        TopicPartition(topic.topic, int(p.partition_index)): _fetched(p)
        for topic in response.responses
        for p in topic.partitions
    }


async def fetch(
    cluster: Cluster, offsets: Mapping[TopicPartition, int], limits: FetchLimits = FetchLimits()
) -> dict[TopicPartition, FetchedPartition]:
    """A consumer fetch of each partition from its leader; raises the first partition error."""

    async def attempt() -> dict[TopicPartition, FetchedPartition]:
        by_leader: dict[BrokerConnection, dict[TopicPartition, FetchPosition]] = {}
        for tp, offset in offsets.items():
            by_leader.setdefault(await cluster.leader(tp), {})[tp] = FetchPosition(offset)
        answers = await asyncio.gather(
            *(fetch_from(conn, positions, limits) for conn, positions in by_leader.items())
        )
        fetched = {tp: part for answer in answers for tp, part in answer.items()}
        for tp, part in fetched.items():
            check(part.error, str(tp))
        return fetched

    return await cluster.call(attempt)


def _fetched(p: Any) -> FetchedPartition:
    aborted = tuple(
        (int(a.producer_id), int(a.first_offset)) for a in (p.aborted_transactions or ())
    )
    return FetchedPartition(
        error=p.error_code,
        high_watermark=int(p.high_watermark),
        last_stable_offset=int(getattr(p, "last_stable_offset", -1)),
        log_start_offset=int(getattr(p, "log_start_offset", -1)),
        records=p.records if p.records is not None else b"",  # no copy
        aborted_transactions=aborted,
    )


def fetch_request(
    version: int,
    positions: Mapping[TopicPartition, FetchPosition],
    limits: FetchLimits,
    replica_id: int,
) -> Any:
    """A sessionless full Fetch for `positions` (consumers: replica_id -1; followers: their id)."""
    module = request_module(ApiKey.FETCH, version)
    topics: dict[str, list[Any]] = {}
    for tp, position in positions.items():
        topics.setdefault(tp.topic, []).append(
            make(
                module,
                "FetchPartition",
                partition=tp.partition,
                current_leader_epoch=position.current_leader_epoch,
                fetch_offset=position.offset,
                last_fetched_epoch=position.last_fetched_epoch,
                log_start_offset=position.log_start_offset,
                partition_max_bytes=limits.partition_max_bytes,
            )
        )
    return make(
        module,
        "FetchRequest",
        replica_id=replica_id,
        max_wait=millis(limits.max_wait_s),
        min_bytes=limits.min_bytes,
        max_bytes=limits.max_bytes,
        isolation_level=1 if limits.read_committed else 0,
        session_id=0,
        session_epoch=FULL_FETCH_SESSION_EPOCH,
        topics=tuple(
            make(module, "FetchTopic", topic=name, partitions=tuple(parts))
            for name, parts in topics.items()
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
