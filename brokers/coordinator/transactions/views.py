"""DescribeTransactions and ListTransactions (KIP-664): read-only views of the served ids.

Owns: `DescribedTransaction`, `TransactionListing` and the two queries over a `TransactionLog`,
as Kafka's handleDescribeTransactions / listTransactionStates: COORDINATOR_NOT_AVAILABLE while
the coordinator is not active, an empty id is INVALID_REQUEST, an unknown (or expiring: Dead) one
TRANSACTIONAL_ID_NOT_FOUND; a listing is refused with COORDINATOR_LOAD_IN_PROGRESS while any
partition loads, reports the state names it does not know, and filters by state, producer id
and (v1) time since the transaction started. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from brokers.coordinator.transactions.metadata import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TxnState,
)
from brokers.coordinator.transactions.records import NO_PRODUCER_ID
from brokers.coordinator.transactions.state import TransactionLog
from brokers.wire.errors import ErrorCode

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = 0  # Kafka's schema default for an error; -1 is "none" for an Empty id
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionListing:
    error: ErrorCode
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[ListedTransaction, ...] = ()


def describe(state: TransactionLog, transactional_id: str, *, active: bool) -> DescribedTransaction:
    def failed(error: ErrorCode) -> DescribedTransaction:
        return DescribedTransaction(transactional_id, error)

    if not active:
        return failed(ErrorCode.coordinator_not_available)
    if not transactional_id:
        return failed(ErrorCode.invalid_request)
    found = state.lookup(transactional_id)
    if isinstance(found, ErrorCode):
        return failed(found)
    meta = found.transactions.get(transactional_id)
    if meta is None or meta.state is TxnState.DEAD:
        return failed(ErrorCode.transactional_id_not_found)
    return DescribedTransaction(
        transactional_id,
        ErrorCode.none,
        state=meta.state.label,
        timeout_ms=meta.timeout_ms,
        start_ms=meta.start_ms,
        producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        partitions=tuple(sorted(meta.partitions)),
    )


def list_transactions(
    state: TransactionLog,
    now_ms: int,
    *,
    active: bool,
    states: Collection[str] = (),
    producer_ids: Collection[int] = (),
    duration_filter_ms: int = -1,
    prefix: str = "",
) -> TransactionListing:
    """The ids this coordinator holds that start with `prefix` (tested first: a tenant's
    listing visits every id in a C loop but builds only its own) and pass the filters."""
    if not active:
        return TransactionListing(ErrorCode.coordinator_not_available)
    if state.ownership.loading:
        return TransactionListing(ErrorCode.coordinator_load_in_progress)
    wanted = {s for name in states if (s := TxnState.from_label(name)) is not None}
    unknown = tuple(name for name in states if TxnState.from_label(name) is None)

    def included(meta: TransactionMetadata) -> bool:
        if meta.state is TxnState.DEAD:
            return False  # being expired
        if producer_ids and meta.producer_id not in producer_ids:
            return False
        if states and meta.state not in wanted:
            return False
        return not (duration_filter_ms >= 0 and now_ms - meta.start_ms <= duration_filter_ms)

    metas = state.metadata_with_prefix(prefix) if prefix else (m for _, m in state.metadata())
    listed = tuple(
        ListedTransaction(meta.transactional_id, meta.producer_id, meta.state.label)
        for meta in metas
        if included(meta)
    )
    return TransactionListing(ErrorCode.none, unknown, listed)
