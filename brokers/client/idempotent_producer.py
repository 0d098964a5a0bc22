"""An idempotent producer of whole batches for Pier's internal writers (KIP-98, KIP-360).

Owns: `IdempotentProducer` (a producer id from InitProducerId without a transactional id, the
next sequence number per partition, one batch in flight per partition, acks=all). A send is retried on retriable errors and lost connections with the SAME
producer id, epoch and base sequence, so a retry of a batch the broker already appended is
answered with its original offsets instead of being appended twice.

When every retry fails the outcome is unknown: the batch stays "in doubt" for its partition.
Sending the same records again reuses its sequence (deduplicated if it had landed); sending
anything else first takes a new producer id, as Kafka's producer bumps its epoch (KIP-360), so
new records can never be mistaken for the doubtful batch. OUT_OF_ORDER_SEQUENCE_NUMBER,
UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_EPOCH also take a new id and resend at sequence 0.

Runs on one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from brokers.client.cluster import Cluster
from brokers.client.errors import BrokerResponseError, ClientError, InvalidArgumentError, check
from brokers.client.messages import make, millis, request_module
from brokers.client.metadata import TopicPartition
from brokers.client.producer import produce
from brokers.client.versions import ApiKey
from brokers.records.builder import RecordLike, build_batch
from brokers.wire.errors import ErrorCode

INIT_PRODUCER_ID = 22

SEQUENCE_LIMIT = 2**31  # sequences are int32 and wrap to 0 (Kafka's incrementSequence)
MAX_REINITIALISATIONS = 3
_REINITIALISE = frozenset(
    {
        ErrorCode.out_of_order_sequence_number,
        ErrorCode.unknown_producer_id,
        ErrorCode.invalid_producer_epoch,
    }
)


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class _InDoubt:
    producer: tuple[int, int]
    records: tuple[RecordLike, ...]


class IdempotentProducer:
    def __init__(
        self,
        cluster: Cluster,
        *,
        timeout_s: float = 30.0,
        compression: int = 0,
        clock_ms: Callable[[], int] = wall_ms,
    ) -> None:
        """`clock_ms` stamps each batch's base timestamp (CreateTime)."""
        self._cluster = cluster
        self._timeout_s = timeout_s
        self._compression = compression
        self._clock_ms = clock_ms
        self._producer: tuple[int, int] | None = None
        self._initialising = asyncio.Lock()
        self._sequences: dict[TopicPartition, int] = {}
        self._in_doubt: dict[TopicPartition, _InDoubt] = {}
        self._partition_locks: dict[TopicPartition, asyncio.Lock] = {}

    @property
    def producer(self) -> tuple[int, int] | None:
        """(producer id, epoch), or None before the first send."""
        return self._producer

    def next_sequence(self, tp: TopicPartition) -> int:
        return self._sequences.get(tp, 0)

    async def send(self, tp: TopicPartition, records: Sequence[RecordLike]) -> int:
        """Append `records` as one batch to `tp` (acks=all); returns the batch's base offset."""
        if not records:
            raise InvalidArgumentError("an idempotent batch needs at least one record")
        lock = self._partition_locks.setdefault(tp, asyncio.Lock())
        async with lock:  # one batch in flight per partition keeps sequences in order
            return await self._send(tp, tuple(records))

    async def _send(self, tp: TopicPartition, records: tuple[RecordLike, ...]) -> int:
        for attempt in range(MAX_REINITIALISATIONS + 1):
            producer = await self._producer_for(tp, records)
            sequence = self._sequences.get(tp, 0)
            try:
                base_offset = await self._produce(tp, records, producer, sequence)
            except BrokerResponseError as exc:
                if exc.code not in _REINITIALISE or attempt == MAX_REINITIALISATIONS:
                    self._note_failure(tp, records, producer, exc)
                    raise
                await self._reinitialise(producer)
                continue
            except ClientError as exc:
                self._note_failure(tp, records, producer, exc)
                raise
            self._in_doubt.pop(tp, None)
            if self._producer == producer:
                self._sequences[tp] = (sequence + len(records)) % SEQUENCE_LIMIT
            return base_offset
        raise AssertionError("unreachable")  # pragma: no cover

    async def _produce(
        self,
        tp: TopicPartition,
        records: tuple[RecordLike, ...],
        producer: tuple[int, int],
        seq: int,
    ) -> int:
        batch = build_batch(
            records,
            compression=self._compression,
            producer_id=producer[0],
            producer_epoch=producer[1],
            base_sequence=seq,
            base_timestamp=self._clock_ms(),
        )
        result = await produce(self._cluster, tp, batch, acks=-1, timeout_s=self._timeout_s)
        assert result is not None  # acks=all always answers
        return result.base_offset

    def _note_failure(
        self,
        tp: TopicPartition,
        records: tuple[RecordLike, ...],
        producer: tuple[int, int],
        error: ClientError,
    ) -> None:
        if error.retriable:  # some attempt may have been appended: the batch is in doubt
            self._in_doubt[tp] = _InDoubt(producer, records)

    async def _producer_for(
        self, tp: TopicPartition, records: tuple[RecordLike, ...]
    ) -> tuple[int, int]:
        doubt = self._in_doubt.get(tp)
        if doubt is not None and doubt.producer == self._producer and doubt.records != records:
            await self._reinitialise(doubt.producer)
        if self._producer is None:
            await self._reinitialise(None)
        assert self._producer is not None
        return self._producer

    async def _reinitialise(self, stale: tuple[int, int] | None) -> None:
        """Take a new producer id unless another partition already replaced `stale`."""
        async with self._initialising:
            if self._producer != stale:
                return
            self._producer = await self._cluster.call(self._init_producer_id)
            self._sequences.clear()
            self._in_doubt.clear()

    async def _init_producer_id(self) -> tuple[int, int]:
        return await new_producer_id(self._cluster)


async def new_producer_id(cluster: Cluster) -> tuple[int, int]:
    """One InitProducerId without a transactional id: a fresh producer id at epoch 0 (Kafka
    always answers a fresh id then, so there is no epoch to bump in place; KIP-360 bumps apply
    to transactional producers). Not retried: callers wrap it in `Cluster.call`."""
    connection = await cluster.any_connection()
    module = request_module(INIT_PRODUCER_ID, connection.version(ApiKey.INIT_PRODUCER_ID))
    request = make(
        module,
        "InitProducerIdRequest",
        transactional_id=None,
        transaction_timeout=millis(60.0),
        producer_id=-1,
        producer_epoch=-1,
    )
    response: Any = await connection.send(request)
    check(response.error_code, "InitProducerId")
    return int(response.producer_id), int(response.producer_epoch)
