"""Fetch (key 1, v4–18): read record batches from partition logs, waiting in purgatory for min_bytes.

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
last stable offset.

Follower fetching (KIP-392), as Kafka: a consumer sending v11+ (which carries `rack_id`, the
client's `client.rack`) may read from a follower, up to the follower's high watermark; the
leader, with `replica.selector.class` set, answers such a consumer a partition's
`preferred_read_replica` (brokers/replication/replica_selector.py) with no records and at once.
Replicas and consumers below v11 read from the leader only. A replica fetching below the local
log start, in the remote tier, is answered OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405). Only
consumers' record bytes count in BytesOut; replicas' go to ReplicationBytesOut, as Kafka counts
them.

Topic ids (KIP-516): from v13 a request names its topics by id and the answer carries the ids.
An id no topic has answers its partitions UNKNOWN_TOPIC_ID; a partition whose local replica
holds another id (the topic was deleted and recreated meanwhile) INCONSISTENT_TOPIC_ID, as
Kafka's ReplicaManager. From v16 (KIP-951) a partition answered NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH carries the leader and epoch this broker knows, and the answer the leaders'
endpoints. v15's ReplicaState, v17's ReplicaDirectoryId and v18's replica high watermark are
read and not needed (followers here fetch with v11: brokers/replication/fetch_answer.py).
Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brokers.common.clock import Clock
from brokers.common.config import BrokerConfig
from brokers.handlers.errors import error_code_for
from brokers.handlers.fetch_response import (
    LeaderEndpoint,
    PartitionData,
    TopicData,
    encode_fetch_response,
)
from brokers.handlers.services import AppendWaiter, MetadataView, Replicas
from brokers.handlers.topic_ids import TopicIds
from brokers.handlers.topic_metrics import BrokerTopicMetrics
from brokers.log.errors import OffsetOutOfRangeError
from brokers.log.txn_index import AbortedTxn
from brokers.replication.errors import NotLeaderOrFollowerError
from brokers.replication.partition import Partition
from brokers.replication.replica_selector import RACK_AWARE_SELECTOR, preferred_read_replica
from brokers.server.context import RequestContext
from brokers.server.response import RawResponse
from brokers.server.routes import Route
from brokers.tiered.remote_log_manager import RemoteLogManager
from brokers.tiered.store import RemoteStorageError
from brokers.wire.errors import ErrorCode

API_KEY = 1
MIN_VERSION = 4  # librdkafka falls back to the legacy message format below v4
MAX_VERSION = 18
TOPIC_ID_VERSION = 13  # KIP-516: topics named by id
CURRENT_LEADER_VERSION = 16  # KIP-951: current leader and node endpoints on leader errors
_LEADER_ERRORS = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})
MAX_WAIT_MS = 30_000
FOLLOWER_FETCHING_VERSION = 11  # KIP-392: rack_id in, preferred_read_replica out


@dataclass(frozen=True, slots=True)
class _Client:
    """Who fetches: a replica (id ≥ 0) or a consumer; for a consumer sending v11+, its rack and
    the live brokers' racks (when the rack-aware selector may use them), Kafka's ClientMetadata."""

    replica_id: int
    follower_fetching: bool = False
    rack: str | None = None
    racks: dict[int, str | None] | None = None


@dataclass(frozen=True, slots=True)
class _RemoteFetch:
    """A consumer's offset below the local log start that the remote tier holds (KIP-405):
    read after the local partitions, off the event loop, in place of `placeholder`."""

    placeholder: PartitionData
    partition: Partition
    offset: int
    max_bytes: int
    min_one_batch: bool


@dataclass(slots=True)
class _Budget:
    remaining: int
    read_committed: bool
    first_with_data: bool = True
    remote: list[_RemoteFetch] | None = None


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    replicas: Replicas
    purgatory: AppendWaiter
    clock: Clock
    topic_metrics: BrokerTopicMetrics
    config: BrokerConfig
    metadata: MetadataView | None
    selector: str | None
    tiered: RemoteLogManager | None = None
    topic_ids: TopicIds | None = None


def route(
    replicas: Replicas,
    purgatory: AppendWaiter,
    clock: Clock,
    topic_metrics: BrokerTopicMetrics,
    config: BrokerConfig,
    metadata: MetadataView | None = None,
    tiered: RemoteLogManager | None = None,
) -> Route:
    selector = config.replica_selector_class
    broker = _Services(
        replicas, purgatory, clock, topic_metrics, config, metadata, selector, tiered,
        TopicIds(metadata),
    )  # fmt: skip

    async def handle(ctx: RequestContext, request: Any) -> RawResponse:
        version = ctx.api_version
        read_committed = getattr(request, "isolation_level", 0) == 1
        if version >= 7 and request.session_id != 0:
            return encode_fetch_response(version, [], error=ErrorCode.fetch_session_id_not_found)
        client = _client(broker, request, version)
        clock = broker.clock
        max_wait = min(request.max_wait.total_seconds(), MAX_WAIT_MS / 1000)
        deadline = clock.monotonic() + max_wait
        wanted = _wanted(broker, request, version)
        keys = [(name, p.partition) for name, _id, t in wanted if name for p in t.partitions]
        while True:
            remote: list[_RemoteFetch] = []
            topics, total, answer_now = _read_all(
                broker, request, wanted, client, read_committed, remote=remote
            )
            remaining = deadline - clock.monotonic()
            if total >= request.min_bytes or answer_now or remaining <= 0 or not keys or remote:
                break
            await broker.purgatory.wait(keys, remaining)
        if remote:
            await _read_remote(broker, topics, remote, read_committed)
        if client.replica_id < 0:
            _count_bytes_out(broker, topics)
        else:
            size = sum(p.records_size for t in topics for p in t.partitions)
            broker.topic_metrics.replication_bytes_out.inc(size)
        leaders = _leaders(broker, topics) if version >= CURRENT_LEADER_VERSION else None
        return encode_fetch_response(
            version, topics, read_committed=read_committed, leaders=leaders
        )

    return Route(API_KEY, MIN_VERSION, MAX_VERSION, handle, name="Fetch")


def replica_id(request: Any) -> int:
    """The fetching replica's id (-1: a consumer); v15+ carries it in ReplicaState (KIP-903)."""
    found = getattr(request, "replica_id", None)
    return int(request.replica_state.replica_id if found is None else found)


def _client(broker: _Services, request: Any, version: int) -> _Client:
    replica = replica_id(request)
    if replica >= 0 or version < FOLLOWER_FETCHING_VERSION:
        return _Client(replica)
    rack = request.rack_id or None
    racks = None
    if rack is not None and broker.selector == RACK_AWARE_SELECTOR and broker.metadata:
        racks = {node: endpoint.rack for node, endpoint in broker.metadata.brokers.items()}
    return _Client(replica, True, rack, racks)


_Wanted = tuple[str | None, bytes, Any]  # name (None: unknown id), id (b"" by name), topic


def _wanted(broker: _Services, request: Any, version: int) -> list[_Wanted]:
    """Each requested topic with its name and id (v13+: the name the id resolves to)."""
    if version < TOPIC_ID_VERSION:
        return [(t.topic, b"", t) for t in request.topics]
    assert broker.topic_ids is not None
    return [
        (broker.topic_ids.name(t.topic_id), t.topic_id.bytes if t.topic_id else bytes(16), t)
        for t in request.topics
    ]


def _read_all(
    broker: _Services, request: Any, wanted: list[_Wanted], client: _Client,
    read_committed: bool, *, remote: list[_RemoteFetch] | None = None,
) -> tuple[list[TopicData], int, bool]:  # fmt: skip
    """Every partition's answer, their record bytes, and whether to answer at once (an error,
    or a consumer sent to another replica, as Kafka). Reads the remote tier must serve are
    appended to `remote` (with a placeholder answer) when given."""
    budget = _Budget(
        remaining=min(request.max_bytes, broker.config.fetch_max_bytes),
        read_committed=read_committed and client.replica_id < 0,
        remote=remote,
    )
    topics: list[TopicData] = []
    total = 0
    answer_now = False
    for name, topic_id, topic in wanted:
        partitions = []
        for fetched in topic.partitions:
            if name is None:
                data = PartitionData(fetched.partition, ErrorCode.unknown_topic_id)
            else:
                data = _read_partition(broker, name, fetched, budget, client, topic_id)
            answer_now = (
                answer_now or data.error != ErrorCode.none or data.preferred_read_replica >= 0
            )
            total += data.records_size
            partitions.append(data)
        topics.append(TopicData(name or "", partitions, topic_id))
    return topics, total, answer_now


def _read_partition(
    broker: _Services, topic: str, wanted: Any, budget: _Budget, client: _Client, topic_id: bytes
) -> PartitionData:
    index = wanted.partition
    replica_id = client.replica_id
    is_replica = replica_id >= 0
    try:
        partition = broker.replicas.get(topic, index)
        if topic_id and partition.topic_id and partition.topic_id != topic_id:
            return PartitionData(index, ErrorCode.inconsistent_topic_id)
        partition.check_epoch(getattr(wanted, "current_leader_epoch", -1))
        if not partition.is_leader and not (client.follower_fetching and partition.is_follower):
            raise NotLeaderOrFollowerError(f"{topic}-{index}")
        if client.racks is not None:
            preferred = preferred_read_replica(
                partition,
                selector=broker.selector,
                client_rack=client.rack,
                fetch_offset=wanted.fetch_offset,
                racks=client.racks,
                now_ms=broker.clock.time_ms(),
            )
            if preferred is not None:
                return _redirected(partition, index, preferred)
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
        tiered = _remote_fetch(broker, topic, wanted, budget, is_replica)
        if tiered is not None:
            return tiered
        if is_replica and (moved := _moved_to_tiered(broker, topic, wanted)) is not None:
            return moved
        broker.topic_metrics.failed_fetch.labels(topic).inc()
        found = broker.replicas.find(topic, index)
        return PartitionData(
            index,
            error_code_for(exc),
            high_watermark=found.high_watermark if found else -1,
            log_start_offset=found.log.log_start_offset if found else -1,
        )
    except Exception as exc:
        if broker.replicas.find(topic, index) is not None:  # a name no partition has: no series
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


def _remote_fetch(
    broker: _Services, topic: str, wanted: Any, budget: _Budget, is_replica: bool
) -> PartitionData | None:
    """A placeholder answer, queued in `budget.remote`, when a consumer's offset below the local
    log start is in the remote tier; None otherwise (followers never read the remote tier)."""
    partition = broker.replicas.find(topic, wanted.partition)
    tiered = broker.tiered
    if tiered is None or is_replica or budget.remote is None or partition is None:
        return None
    if not tiered.serves(partition.log, wanted.fetch_offset):
        return None
    placeholder = PartitionData(
        wanted.partition,
        ErrorCode.none,
        high_watermark=partition.high_watermark,
        last_stable_offset=partition.last_stable_offset,
        log_start_offset=tiered.log_start_offset(partition.log),
    )
    limit = max(min(wanted.partition_max_bytes, budget.remaining), 0)
    min_one = budget.first_with_data and wanted.partition_max_bytes > 0
    budget.remote.append(_RemoteFetch(placeholder, partition, wanted.fetch_offset, limit, min_one))
    budget.remaining -= limit
    budget.first_with_data = False
    return placeholder


def _moved_to_tiered(broker: _Services, topic: str, wanted: Any) -> PartitionData | None:
    """KIP-405: a replica fetching below the leader's local log start, at an offset the remote
    tier holds, is told OFFSET_MOVED_TO_TIERED_STORAGE (it then rebuilds its epochs and producer
    state from the remote tier: brokers/replication/tier_state.py); None otherwise."""
    partition = broker.replicas.find(topic, wanted.partition)
    tiered = broker.tiered
    if tiered is None or partition is None or not tiered.serves(partition.log, wanted.fetch_offset):
        return None
    return PartitionData(
        wanted.partition,
        ErrorCode.offset_moved_to_tiered_storage,
        high_watermark=partition.high_watermark,
        log_start_offset=tiered.log_start_offset(partition.log),
    )


async def _read_remote(
    broker: _Services, topics: list[TopicData], pending: list[_RemoteFetch], read_committed: bool
) -> None:
    """Fill in the queued remote reads (the store is read on worker threads)."""
    assert broker.tiered is not None
    for fetch in pending:
        log = fetch.partition.log
        try:
            read = await broker.tiered.read(
                log, fetch.offset, fetch.max_bytes, min_one_batch=fetch.min_one_batch
            )
            aborted = None
            if read is not None and read_committed:
                aborted = await broker.tiered.aborted(log, fetch.offset, read.next_offset)
        except RemoteStorageError:
            read, code = None, ErrorCode.kafka_storage_error
        else:
            code = ErrorCode.none if read is not None else ErrorCode.offset_out_of_range
        base = fetch.placeholder
        answer = PartitionData(
            base.index,
            code,
            high_watermark=base.high_watermark,
            last_stable_offset=base.last_stable_offset,
            log_start_offset=base.log_start_offset,
            records=None if read is None else read.records,
            aborted=None if read is None else _aborted(aborted),
        )
        for topic in topics:
            for position, data in enumerate(topic.partitions):
                if data is base:
                    topic.partitions[position] = answer


def _redirected(partition: Partition, index: int, preferred: int) -> PartitionData:
    """Kafka's answer naming a preferred read replica: the offsets, no records."""
    return PartitionData(
        index,
        ErrorCode.none,
        high_watermark=partition.high_watermark,
        last_stable_offset=partition.last_stable_offset,
        log_start_offset=partition.log.log_start_offset,
        preferred_read_replica=preferred,
    )


def _leaders(broker: _Services, topics: list[TopicData]) -> dict[tuple[str, int], LeaderEndpoint]:
    """v16+: the leader this broker knows for each partition answered with a leader error."""
    metadata = broker.metadata
    found: dict[tuple[str, int], LeaderEndpoint] = {}
    if metadata is None:
        return found
    for topic in topics:
        for data in topic.partitions:
            if data.error not in _LEADER_ERRORS:
                continue
            meta = metadata.partition(topic.name, data.index)
            if meta is None:
                continue
            endpoint = metadata.brokers.get(meta.leader)
            found[(topic.name, data.index)] = LeaderEndpoint(
                meta.leader, meta.leader_epoch, endpoint
            )
    return found


def _aborted(found: list[AbortedTxn] | None) -> list[tuple[int, int]] | None:
    if found is None:
        return None
    return [(txn.producer_id, txn.first_offset) for txn in found]


def _count_bytes_out(broker: _Services, topics: list[TopicData]) -> None:
    for topic in topics:
        size = sum(p.records_size for p in topic.partitions)
        if size:
            broker.topic_metrics.bytes_out.labels(topic.name).inc(size)
