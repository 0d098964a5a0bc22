"""Fetch (key 1, v4–12): read record batches from partition logs, waiting in purgatory for min_bytes.

Sessionless (KIP-227 sessions are declined by answering session id 0, so clients send full
fetches). A partition's records are a file region, sent with sendfile where possible. Limits, as
Kafka: `partition_max_bytes` per partition, `max_bytes` per response, but the first partition
with data always returns at least one whole batch (KIP-74). Consumers read up to the high
watermark — read_committed ones (isolation_level 1, KIP-98) up to the last stable offset, with
the aborted transactions of the data returned, so they can drop aborted records; a parked
read_committed fetch is woken when a committed marker moves the last stable offset, because the
high watermark then moves too. Replicas (replica_id ≥ 0) read up to the log end, and only from
the leader, which then records the follower's position (`Partition.update_follower_fetch_state`:
ISR expansion, high watermark, waking acks=all produces). Every partition's answer carries the
last stable offset. Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brokers.common.clock import Clock
from brokers.common.config import BrokerConfig
from brokers.handlers.errors import error_code_for
from brokers.handlers.fetch_response import PartitionData, TopicData, encode_fetch_response
from brokers.handlers.services import AppendWaiter, Replicas
from brokers.handlers.topic_metrics import BrokerTopicMetrics
from brokers.log.errors import OffsetOutOfRangeError
from brokers.log.txn_index import AbortedTxn
from brokers.replication.errors import NotLeaderOrFollowerError
from brokers.server.context import RequestContext
from brokers.server.response import RawResponse
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 1
MIN_VERSION = 4  # librdkafka falls back to the legacy message format below v4
MAX_VERSION = 12  # v13+ names topics by id
MAX_WAIT_MS = 30_000


@dataclass(slots=True)
class _Budget:
    remaining: int
    read_committed: bool
    first_with_data: bool = True


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    replicas: Replicas
    purgatory: AppendWaiter
    clock: Clock
    topic_metrics: BrokerTopicMetrics
    config: BrokerConfig


def route(
    replicas: Replicas,
    purgatory: AppendWaiter,
    clock: Clock,
    topic_metrics: BrokerTopicMetrics,
    config: BrokerConfig,
) -> Route:
    broker = _Services(replicas, purgatory, clock, topic_metrics, config)

    async def handle(ctx: RequestContext, request: Any) -> RawResponse:
        version = ctx.api_version
        read_committed = getattr(request, "isolation_level", 0) == 1
        if version >= 7 and request.session_id != 0:
            return encode_fetch_response(version, [], error=ErrorCode.fetch_session_id_not_found)
        replica_id = request.replica_id
        clock = broker.clock
        max_wait = min(request.max_wait.total_seconds(), MAX_WAIT_MS / 1000)
        deadline = clock.monotonic() + max_wait
        keys = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
        while True:
            topics, total, failed = _read_all(broker, request, replica_id, read_committed)
            remaining = deadline - clock.monotonic()
            if total >= request.min_bytes or failed or remaining <= 0 or not keys:
                break
            await broker.purgatory.wait(keys, remaining)
        _count_bytes_out(broker, topics)
        return encode_fetch_response(version, topics, read_committed=read_committed)

    return Route(API_KEY, MIN_VERSION, MAX_VERSION, handle, name="Fetch")


def _read_all(
    broker: _Services, request: Any, replica_id: int, read_committed: bool
) -> tuple[list[TopicData], int, bool]:
    budget = _Budget(
        remaining=min(request.max_bytes, broker.config.fetch_max_bytes),
        read_committed=read_committed and replica_id < 0,
    )
    topics: list[TopicData] = []
    total = 0
    failed = False
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            data = _read_partition(broker, topic.topic, wanted, budget, replica_id)
            failed = failed or data.error != ErrorCode.none
            total += data.records_size
            partitions.append(data)
        topics.append(TopicData(topic.topic, partitions))
    return topics, total, failed


def _read_partition(
    broker: _Services, topic: str, wanted: Any, budget: _Budget, replica_id: int
) -> PartitionData:
    index = wanted.partition
    is_replica = replica_id >= 0
    try:
        partition = broker.replicas.get(topic, index)
        partition.check_epoch(getattr(wanted, "current_leader_epoch", -1))
        if not partition.is_leader:  # no follower fetching (KIP-392) yet
            raise NotLeaderOrFollowerError(f"{topic}-{index}")
        limit = max(min(wanted.partition_max_bytes, budget.remaining), 0)
        fetched = partition.read(
            wanted.fetch_offset,
            limit,
            for_follower=is_replica,
            min_one_batch=budget.first_with_data and wanted.partition_max_bytes > 0,
            read_committed=budget.read_committed,
        )
        region = fetched.read.region if fetched.read is not None else None
        if is_replica:
            partition.update_follower_fetch_state(
                replica_id,
                wanted.fetch_offset,
                getattr(wanted, "log_start_offset", -1),
                broker.clock.time_ms(),
            )
    except OffsetOutOfRangeError as exc:
        broker.topic_metrics.failed_fetch.labels(topic).inc()
        found = broker.replicas.find(topic, index)
        return PartitionData(
            index,
            error_code_for(exc),
            high_watermark=found.high_watermark if found else -1,
            log_start_offset=found.log.log_start_offset if found else -1,
        )
    except Exception as exc:
        broker.topic_metrics.failed_fetch.labels(topic).inc()
        return PartitionData(index, error_code_for(exc))
    if region is not None and region.size > 0:
        budget.remaining -= region.size
        budget.first_with_data = False
    return PartitionData(
        index,
        ErrorCode.none,
        high_watermark=fetched.high_watermark,
        last_stable_offset=fetched.last_stable_offset,
        log_start_offset=fetched.log_start_offset,
        records=region,
        aborted=_aborted(fetched.aborted_transactions),
    )


def _aborted(found: list[AbortedTxn] | None) -> list[tuple[int, int]] | None:
    if found is None:
        return None
    return [(txn.producer_id, txn.first_offset) for txn in found]


def _count_bytes_out(broker: _Services, topics: list[TopicData]) -> None:
    for topic in topics:
        size = sum(p.records_size for p in topic.partitions)
        if size:
            broker.topic_metrics.bytes_out.labels(topic.name).inc(size)
