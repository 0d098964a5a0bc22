"""Transactions from the admin side: list and describe them, the producers of a partition, and
aborting a hanging transaction.

Owns: `list_transactions` (ListTransactions to every broker, as Kafka's Admin does: each
transaction coordinator knows only the ids of the `__transaction_state` partitions it leads),
`describe_transactions` (DescribeTransactions at each id's coordinator, found with FindCoordinator
key type 1), `describe_producers` (DescribeProducers at the partition leader, or at one named
replica), `find_hanging` (kafka-transactions.sh find-hanging's search: open transactions older
than any live one can be whose coordinator does not hold the partition) and `abort_transaction`
(one WriteTxnMarkers ABORT entry sent to the partition leader, as Kafka's
`Admin.abortTransaction` does for `kafka-transactions.sh abort`: the marker ends a transaction
whose coordinator will never end it). Filters a broker's ListTransactions version
cannot carry (duration: v1, id pattern: v2) are refused with UnsupportedVersionError, as Kafka's
Admin does. Retriable errors (coordinator moved or loading, leader moved) are retried through
`Cluster.call`. Runs on the event loop.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from brokers.client.cluster import Cluster
from brokers.client.connection import BrokerConnection
from brokers.client.errors import (
    BrokerResponseError,
    UnexpectedAnswerError,
    UnsupportedVersionError,
    check,
)
from brokers.client.messages import epoch_ms, make, request_module
from brokers.client.metadata import TopicPartition
from brokers.client.versions import ApiKey
from brokers.wire.errors import ErrorCode

TRANSACTION_KEY_TYPE = 1  # FindCoordinator key type of a transactional id (KIP-98)
DURATION_FILTER_VERSION = 1  # ListTransactions v1: KIP-994
PATTERN_FILTER_VERSION = 2  # ListTransactions v2: KIP-1152
STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int  # the broker that answered (the id's coordinator)


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int | None  # None: no transaction has started under this producer id yet
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int | None  # None: no marker of this producer seen yet
    current_txn_start_offset: int | None  # None: no open transaction on the partition


@dataclass(frozen=True, slots=True)
class AbortSpec:
    """Kafka's AbortTransactionSpec: which producer's open transaction to end on which partition."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:
        return (
            f"AbortTransactionSpec(topicPartition={self.tp}, producerId={self.producer_id}, "
            f"producerEpoch={self.producer_epoch}, coordinatorEpoch={self.coordinator_epoch})"
        )


# -- ListTransactions ------------------------------------------------------------------------------
async def list_transactions(
    cluster: Cluster,
    *,
    states: Collection[str] = (),
    producer_ids: Collection[int] = (),
    duration_ms: int = -1,
    id_pattern: str | None = None,
) -> list[TransactionListing]:
    """Every broker's transactions matching all the filters (empty filters match all;
    `duration_ms` >= 0: only transactions running longer than that), sorted by coordinator and id."""
    metadata = await cluster.metadata(refresh=True)
    found: list[TransactionListing] = []
    for node_id in sorted(metadata.brokers):

        async def ask(node_id: int = node_id) -> list[TransactionListing]:
            connection = await cluster.node(node_id)
            return await _list_on(
                connection, node_id, tuple(states), tuple(producer_ids), duration_ms, id_pattern
            )

        found += await cluster.call(ask)
    return sorted(found, key=lambda t: (t.coordinator_id, t.transactional_id))


async def _list_on(
    connection: BrokerConnection,
    node_id: int,
    states: tuple[str, ...],
    producer_ids: tuple[int, ...],
    duration_ms: int,
    id_pattern: str | None,
) -> list[TransactionListing]:
    version = connection.version(ApiKey.LIST_TRANSACTIONS)
    if duration_ms >= 0 and version < DURATION_FILTER_VERSION:
        raise UnsupportedVersionError(
            f"broker {node_id} cannot filter transactions by duration (ListTransactions v{version})"
        )
    if id_pattern and version < PATTERN_FILTER_VERSION:
        raise UnsupportedVersionError(
            f"broker {node_id} cannot filter transactional ids by pattern "
            f"(ListTransactions v{version})"
        )
    module = request_module(ApiKey.LIST_TRANSACTIONS, version)
    request = make(
        module,
        "ListTransactionsRequest",
        state_filters=states,
        producer_id_filters=producer_ids,
        duration_filter=duration_ms,
        transactional_id_pattern=id_pattern or None,
    )
    response = await connection.send(request)
    check(response.error_code, f"ListTransactions on broker {node_id}")
    return [
        TransactionListing(t.transactional_id, int(t.producer_id), t.transaction_state, node_id)
        for t in response.transaction_states
    ]


# -- DescribeTransactions --------------------------------------------------------------------------
async def describe_transactions(
    cluster: Cluster, transactional_ids: Sequence[str]
) -> dict[str, TransactionDescription]:
    """One description per id; BrokerResponseError (e.g. TRANSACTIONAL_ID_NOT_FOUND) for the first
    id that has none."""
    described: dict[str, TransactionDescription] = {}
    for transactional_id in transactional_ids:

        async def ask(transactional_id: str = transactional_id) -> TransactionDescription:
            node_id, connection = await transaction_coordinator(cluster, transactional_id)
            return await _describe(connection, node_id, transactional_id)

        described[transactional_id] = await cluster.call(ask)
    return described


async def transaction_coordinator(
    cluster: Cluster, transactional_id: str
) -> tuple[int, BrokerConnection]:
    """The broker id of the transactional id's coordinator and a connection to it."""
    connection = await cluster.any_connection()
    version = connection.version(ApiKey.FIND_COORDINATOR)
    if version < 1:  # v0 finds group coordinators only
        raise UnsupportedVersionError("FindCoordinator v0 cannot find transaction coordinators")
    module = request_module(ApiKey.FIND_COORDINATOR, version)
    request = make(
        module,
        "FindCoordinatorRequest",
        key=transactional_id,
        key_type=TRANSACTION_KEY_TYPE,
        coordinator_keys=(transactional_id,),
    )
    response: Any = await connection.send(request)
    found = response.coordinators[0] if version >= 4 else response
    context = f"transactional id {transactional_id}"
    check(found.error_code, context, getattr(found, "error_message", None))
    return int(found.node_id), await cluster.connect(found.host, int(found.port))


async def _describe(
    connection: BrokerConnection, node_id: int, transactional_id: str
) -> TransactionDescription:
    version = connection.version(ApiKey.DESCRIBE_TRANSACTIONS)
    module = request_module(ApiKey.DESCRIBE_TRANSACTIONS, version)
    request = make(module, "DescribeTransactionsRequest", transactional_ids=(transactional_id,))
    response = await connection.send(request)
    states = [s for s in response.transaction_states if s.transactional_id == transactional_id]
    if len(states) != 1:
        raise UnexpectedAnswerError(
            f"DescribeTransactions answered {len(states)} states for {transactional_id!r}"
        )
    (state,) = states
    check(state.error_code, f"transactional id {transactional_id}")
    return TransactionDescription(
        transactional_id=transactional_id,
        coordinator_id=node_id,
        state=state.transaction_state,
        producer_id=int(state.producer_id),
        producer_epoch=int(state.producer_epoch),
        timeout_ms=_millis(state.transaction_timeout),
        start_time_ms=_start_time(state.transaction_start_time),
        partitions=tuple(
            TopicPartition(topic.topic, int(p)) for topic in state.topics for p in topic.partitions
        ),
    )


def _millis(duration: datetime.timedelta) -> int:
    return round(duration.total_seconds() * 1000)


def _start_time(value: datetime.datetime | None) -> int | None:
    ms = epoch_ms(value)
    return None if ms < 0 else ms


# -- DescribeProducers -----------------------------------------------------------------------------
async def describe_producers(
    cluster: Cluster, partitions: Sequence[TopicPartition], *, broker_id: int | None = None
) -> dict[TopicPartition, list[ProducerState]]:
    """The active producers of each partition, as its leader (or replica `broker_id`) knows them."""
    described: dict[TopicPartition, list[ProducerState]] = {}
    for tp in partitions:

        async def ask(tp: TopicPartition = tp) -> list[ProducerState]:
            if broker_id is None:
                return await _producers_on(await cluster.leader(tp), tp)
            return await _producers_on(await cluster.node(broker_id), tp)

        described[tp] = await cluster.call(ask)
    return described


async def _producers_on(connection: BrokerConnection, tp: TopicPartition) -> list[ProducerState]:
    module = request_module(
        ApiKey.DESCRIBE_PRODUCERS, connection.version(ApiKey.DESCRIBE_PRODUCERS)
    )
    topic = make(module, "TopicRequest", name=tp.topic, partition_indexes=(tp.partition,))
    response = await connection.send(make(module, "DescribeProducersRequest", topics=(topic,)))
    answer = _only_partition(response.topics, tp, "partition_index", "DescribeProducers")
    check(answer.error_code, str(tp), answer.error_message)
    return [
        ProducerState(
            producer_id=int(p.producer_id),
            producer_epoch=int(p.producer_epoch),
            last_sequence=int(p.last_sequence),
            last_timestamp_ms=int(p.last_timestamp),
            coordinator_epoch=None if p.coordinator_epoch < 0 else int(p.coordinator_epoch),
            current_txn_start_offset=(
                None if p.current_txn_start_offset < 0 else int(p.current_txn_start_offset)
            ),
        )
        for p in answer.active_producers
    ]


def _only_partition(topics: Any, tp: TopicPartition, index_field: str, api: str) -> Any:
    """The one partition entry of a response about one partition; a protocol violation otherwise."""
    entries = [
        p
        for t in topics
        if t.name == tp.topic
        for p in t.partitions
        if getattr(p, index_field) == tp.partition
    ]
    if len(entries) != 1:
        raise UnexpectedAnswerError(f"{api} answered {len(entries)} entries for {tp}")
    return entries[0]


async def find_open_transaction(
    cluster: Cluster, tp: TopicPartition, start_offset: int
) -> AbortSpec | None:
    """The abort spec of the transaction open on `tp` since `start_offset`, if there is one
    (kafka-transactions.sh abort --start-offset: the producer's epochs come from DescribeProducers;
    a producer that never saw a marker gets coordinator epoch 0, the lowest any coordinator has)."""
    for state in (await describe_producers(cluster, [tp]))[tp]:
        if state.current_txn_start_offset == start_offset:
            return AbortSpec(
                tp, state.producer_id, state.producer_epoch, state.coordinator_epoch or 0
            )
    return None


# -- find-hanging ----------------------------------------------------------------------------------
Candidate = tuple[TopicPartition, ProducerState]


async def find_hanging(
    cluster: Cluster,
    partitions: Sequence[TopicPartition],
    *,
    max_ms: int,
    now_ms: int,
    broker_id: int | None = None,
) -> list[Candidate]:
    """Kafka's `kafka-transactions.sh find-hanging`: the open transactions of `partitions` (as
    their leaders, or replica `broker_id`, know them) that no coordinator will ever end."""
    producers = await describe_producers(cluster, partitions, broker_id=broker_id)
    candidates = open_longer_than(producers, max_ms, now_ms)
    if not candidates:
        return []
    pids = {state.producer_id for _tp, state in candidates}
    listed = await list_transactions(cluster, producer_ids=sorted(pids))
    ids = {t.producer_id: t.transactional_id for t in listed if t.producer_id in pids}
    descriptions = {
        transactional_id: await _description_or_none(cluster, transactional_id)
        for transactional_id in sorted(set(ids.values()))
    }
    return hanging(candidates, ids, descriptions)


async def _description_or_none(
    cluster: Cluster, transactional_id: str
) -> TransactionDescription | None:
    try:
        return (await describe_transactions(cluster, [transactional_id]))[transactional_id]
    except BrokerResponseError as exc:
        if exc.code == ErrorCode.transactional_id_not_found:
            return None
        raise


def open_longer_than(
    producers: Mapping[TopicPartition, Sequence[ProducerState]], max_ms: int, now_ms: int
) -> list[Candidate]:
    """Open transactions whose producer last wrote more than `max_ms` ago: no live transaction
    can be that old, since its coordinator aborts it after its timeout."""
    return [
        (tp, state)
        for tp, states in producers.items()
        for state in states
        if state.current_txn_start_offset is not None and now_ms - state.last_timestamp_ms > max_ms
    ]


def hanging(
    candidates: Sequence[Candidate],
    ids: Mapping[int, str],
    descriptions: Mapping[str, TransactionDescription | None],
) -> list[Candidate]:
    """Kafka's test: a candidate hangs unless its producer id maps to a transactional id whose
    coordinator still lists the partition in its transaction (it will write that marker)."""
    found = []
    for tp, state in candidates:
        transactional_id = ids.get(state.producer_id)
        description = descriptions.get(transactional_id) if transactional_id else None
        if description is None or tp not in description.partitions:
            found.append((tp, state))
    return found


# -- WriteTxnMarkers (abort) -----------------------------------------------------------------------
async def abort_transaction(cluster: Cluster, spec: AbortSpec) -> None:
    """Write an ABORT marker for `spec`'s producer on its partition, at the partition leader.
    BrokerResponseError: INVALID_PRODUCER_EPOCH (a newer epoch wrote there),
    TRANSACTION_COORDINATOR_FENCED (a newer coordinator epoch did), CLUSTER_AUTHORIZATION_FAILED."""

    async def attempt() -> None:
        await _abort_at(await cluster.leader(spec.tp), spec)

    await cluster.call(attempt)


async def _abort_at(connection: BrokerConnection, spec: AbortSpec) -> None:
    module = request_module(ApiKey.WRITE_TXN_MARKERS, connection.version(ApiKey.WRITE_TXN_MARKERS))
    topic = make(
        module, "WritableTxnMarkerTopic", name=spec.tp.topic, partition_indexes=(spec.tp.partition,)
    )
    marker = make(
        module,
        "WritableTxnMarker",
        producer_id=spec.producer_id,
        producer_epoch=spec.producer_epoch,
        transaction_result=False,  # ABORT
        topics=(topic,),
        coordinator_epoch=spec.coordinator_epoch,
    )
    response = await connection.send(make(module, "WriteTxnMarkersRequest", markers=(marker,)))
    results = [m for m in response.markers if m.producer_id == spec.producer_id]
    if len(results) != 1:
        raise UnexpectedAnswerError(f"WriteTxnMarkers answered {len(results)} entries for {spec}")
    answer = _only_partition(results[0].topics, spec.tp, "partition_index", "WriteTxnMarkers")
    check(answer.error_code, str(spec.tp))
