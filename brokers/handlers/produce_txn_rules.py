"""The request-wide rules a Produce's transactional batches must meet before any partition is
written (Kafka's KafkaApis.handleProduceRequest and ReplicaManager.handleProduceAppend).

Owns `request_refusal`: a request carrying a transactional batch without a transactional id is
refused on every partition with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (without it, a client could
open a transaction that no coordinator knows, which no marker ever closes: the partition's last
stable offset would stay behind it, stalling read_committed consumers and everything that waits
for the LSO); transactional batches of more than one producer (id, epoch) in one request are
refused on every partition with INVALID_PRODUCER_ID_MAPPING (a request's transactional id names
one producer; each further one would cost the leader a coordinator call). A client's request
carries one batch per partition (`brokers/records/validate.py`), so its first batch's attributes
decide; a record set too short or not of magic 2 is left to the append's own errors. Pure
functions; thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable

from brokers.records.batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    MAGIC_OFFSET,
    TRANSACTIONAL_MASK,
    parse_header,
)
from brokers.wire.errors import ErrorCode
from brokers.wire.produce_request import ProduceTopic

_TRANSACTIONAL_BYTE = ATTRIBUTES_OFFSET + 1  # the attributes are a big-endian int16
NO_TRANSACTIONAL_ID = (
    ErrorCode.transactional_id_authorization_failed,
    "Transactional records need the request's transactional id",
)
MORE_THAN_ONE_PRODUCER = (
    ErrorCode.invalid_producer_id_mapping,
    "Transactional records contained more than one producer ID",
)


def request_refusal(
    transactional_id: str | None, topics: Iterable[tuple[str | None, ProduceTopic]]
) -> tuple[ErrorCode, str] | None:
    """The error every partition of the request gets, or None when the request may go on."""
    records = [data.records for _, topic in topics for data in topic.partitions]
    if transactional_id is None:
        return NO_TRANSACTIONAL_ID if any(map(_is_transactional, records)) else None
    producers = {_producer(r) for r in records if r is not None and _is_transactional(r)}
    return MORE_THAN_ONE_PRODUCER if len(producers) > 1 else None


def _is_transactional(records: memoryview | None) -> bool:
    """A v2 first batch flagged transactional (Kafka's RequestUtils.hasTransactionalRecords:
    the attribute alone, control batches and batches without a producer id included)."""
    return (
        records is not None
        and len(records) >= HEADER_SIZE
        and records[MAGIC_OFFSET] == 2
        and bool(records[_TRANSACTIONAL_BYTE] & TRANSACTIONAL_MASK)
    )


def _producer(records: memoryview) -> tuple[int, int]:
    header = parse_header(records)
    return header.producer_id, header.producer_epoch
