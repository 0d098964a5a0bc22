"""The transactional requests of a producer, sent raw (kio) so a test controls epochs and timing.

Owns: InitProducerId v4, AddPartitionsToTxn v3, Produce v9 of one transactional batch (built with
`brokers.records.builder`), EndTxn v3, and the admin view (ListTransactions v1, DescribeTransactions
v0) — each one call on a `tests.e2e.raw_wire.RawConnection` to
the transaction coordinator (on a single broker: the broker) returning Kafka's error code (and
what the answer carries). `init_producer_id` waits out the answers Kafka's producer retries
(CONCURRENT_TRANSACTIONS while an earlier transaction completes, the coordinator loading). This
is what lets a test hold back a request of an old epoch and deliver it late. Blocking; a
connection belongs to one thread.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kio.schema.add_partitions_to_txn.v3.response import AddPartitionsToTxnResponse
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.describe_transactions.v0.response import DescribeTransactionsResponse
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.end_txn.v3.response import EndTxnResponse
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.list_transactions.v1.response import ListTransactionsResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import Records, i16, i32, i32Timedelta

from brokers.records.builder import simple_batch
from brokers.wire.errors import ErrorCode
from tests.e2e.raw_wire import RawConnection
from tests.polling import wait_until

# What Kafka's producer retries InitProducerId on: an earlier transaction still completing, the
# coordinator loading or moving.
INIT_RETRIABLE = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


def init_producer_id(
    connection: RawConnection, transactional_id: str, timeout_ms: int, *, wait: float = 30.0
) -> tuple[int, int]:
    """(producer id, epoch) once the coordinator answers without a retriable error."""
    request = InitProducerIdRequest(
        transactional_id=TransactionalId(transactional_id), transaction_timeout=_ms(timeout_ms)
    )

    def answered() -> Any:
        response = connection.call(request, InitProducerIdResponse)
        return None if response.error_code in INIT_RETRIABLE else response

    response = wait_until(answered, what=f"InitProducerId of {transactional_id}", timeout=wait)
    assert response.error_code == ErrorCode.none, f"InitProducerId: {response.error_code!r}"
    return int(response.producer_id), int(response.producer_epoch)


def add_partitions(
    connection: RawConnection,
    transactional_id: str,
    producer: tuple[int, int],
    topic: str,
    partitions: Sequence[int],
) -> dict[int, int]:
    """Partition → error code of AddPartitionsToTxn."""
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TransactionalId(transactional_id),
        v3_and_below_producer_id=ProducerId(producer[0]),
        v3_and_below_producer_epoch=i16(producer[1]),
        v3_and_below_topics=(
            AddPartitionsToTxnTopic(name=TopicName(topic), partitions=tuple(map(i32, partitions))),
        ),
    )
    response = connection.call(request, AddPartitionsToTxnResponse)
    (topic_result,) = response.results_by_topic_v3_and_below
    return {
        int(r.partition_index): int(r.partition_error_code)
        for r in topic_result.results_by_partition
    }


def produce_transactional(
    connection: RawConnection,
    transactional_id: str,
    topic: str,
    partition: int,
    producer: tuple[int, int],
    base_sequence: int,
    values: Sequence[bytes],
) -> int:
    """One transactional batch (acks=all); the partition's error code."""
    batch = simple_batch(
        list(values),
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=base_sequence,
        is_transactional=True,
    )
    request = ProduceRequest(
        transactional_id=TransactionalId(transactional_id),  # Kafka authorizes the batch by it
        acks=i16(-1),
        timeout=_ms(10_000),
        topic_data=(
            TopicProduceData(
                name=TopicName(topic),
                partition_data=(
                    PartitionProduceData(index=i32(partition), records=Records(batch)),
                ),
            ),
        ),
    )
    response = connection.call(request, ProduceResponse)
    (answer,) = response.responses[0].partition_responses
    return int(answer.error_code)


def end_txn(
    connection: RawConnection, transactional_id: str, producer: tuple[int, int], *, commit: bool
) -> int:
    request = EndTxnRequest(
        transactional_id=TransactionalId(transactional_id),
        producer_id=ProducerId(producer[0]),
        producer_epoch=i16(producer[1]),
        committed=commit,
    )
    return int(connection.call(request, EndTxnResponse).error_code)


def list_transactions(connection: RawConnection) -> dict[str, tuple[int, str]]:
    """Transactional id → (producer id, state) of every id this broker coordinates."""
    response = connection.call(ListTransactionsRequest(), ListTransactionsResponse)
    assert response.error_code == ErrorCode.none, f"ListTransactions: {response.error_code!r}"
    return {
        str(s.transactional_id): (int(s.producer_id), s.transaction_state)
        for s in response.transaction_states
    }


def describe_transactions(
    connection: RawConnection, transactional_ids: Sequence[str]
) -> dict[str, Any]:
    """Transactional id → its DescribeTransactions entry (error code, state, producer id/epoch)."""
    request = DescribeTransactionsRequest(
        transactional_ids=tuple(TransactionalId(t) for t in transactional_ids)
    )
    response = connection.call(request, DescribeTransactionsResponse)
    return {str(s.transactional_id): s for s in response.transaction_states}
