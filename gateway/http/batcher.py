"""Coalescing HTTP records bound for one partition into record batches: Kafka's producer
batching, for a server whose clients send one record per request.

Owns: `PartitionBatcher`. Per fleet partition at most one Produce is at the broker; records that
arrive meanwhile wait and go together in the next batch (up to `MAX_BATCH_RECORDS` records or
`MAX_BATCH_BYTES` bytes), so a lone request pays no delay and concurrent or streamed requests share
one round trip and one append. Records keep their arrival order within a partition (one batch at
a time, in order). Each record learns its own offset (the batch's base offset plus its index). A
batch the broker refuses with a non-retriable error is retried record by record, so one record
(e.g. over the topic's `max.message.bytes`) never fails its neighbours. Every batch is built from
records of one tenant topic (the key is the prefixed fleet name), so tenants never share a batch.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from brokers.client.errors import BrokerResponseError, ClientError
from brokers.client.metadata import TopicPartition
from brokers.client.producer import ProduceResult
from brokers.records.builder import build_batch
from brokers.records.record import Headers, Record

MAX_BATCH_RECORDS = 500
MAX_BATCH_BYTES = 512 * 1024
Send = Callable[[TopicPartition, bytes], Awaitable[ProduceResult | None]]


@dataclass(slots=True)
class Pending:
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int
    done: asyncio.Future[ProduceResult]

    @property
    def size(self) -> int:
        return len(self.key or b"") + len(self.value or b"") + 64


class PartitionBatcher:
    def __init__(self, send: Send) -> None:
        self._send = send
        self._queues: dict[TopicPartition, deque[Pending]] = {}
        self._busy: set[TopicPartition] = set()
        self._drains: set[asyncio.Task[None]] = set()

    def append(
        self,
        tp: TopicPartition,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
        timestamp_ms: int,
    ) -> asyncio.Future[ProduceResult]:
        """Queue one record; the future gets its own offset (as `ProduceResult.base_offset`)."""
        done: asyncio.Future[ProduceResult] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(tp, deque()).append(
            Pending(key, value, headers, timestamp_ms, done)
        )
        if tp not in self._busy:
            self._busy.add(tp)
            task = asyncio.ensure_future(self._drain(tp))
            self._drains.add(task)
            task.add_done_callback(self._drains.discard)
        return done

    async def _drain(self, tp: TopicPartition) -> None:
        try:
            queue = self._queues[tp]
            while queue:
                await self._flush(tp, _take(queue))
        finally:
            self._busy.discard(tp)
            if not self._queues.get(tp):
                self._queues.pop(tp, None)

    async def _flush(self, tp: TopicPartition, records: list[Pending]) -> None:
        try:
            result = await self._send(tp, _batch(records))
        except BrokerResponseError as exc:
            if len(records) > 1 and not exc.retriable:
                for record in records:  # one bad record must not fail the others
                    await self._flush(tp, [record])
                return
            _fail(records, exc)
            return
        except ClientError as exc:
            _fail(records, exc)
            return
        except Exception as exc:  # never leave a waiting request hanging
            _fail(records, exc)
            return
        assert result is not None
        for index, record in enumerate(records):
            if not record.done.done():
                record.done.set_result(
                    ProduceResult(
                        result.base_offset + index,
                        result.log_append_time_ms,
                        result.log_start_offset,
                    )
                )


def _take(queue: deque[Pending]) -> list[Pending]:
    taken: list[Pending] = []
    size = 0
    while queue and len(taken) < MAX_BATCH_RECORDS:
        if taken and size + queue[0].size > MAX_BATCH_BYTES:
            break
        record = queue.popleft()
        taken.append(record)
        size += record.size
    return taken


def _batch(records: list[Pending]) -> bytes:
    base = records[0].timestamp_ms
    return build_batch(
        [
            Record(i, r.timestamp_ms - base, r.key, r.value, r.headers)
            for i, r in enumerate(records)
        ],
        base_timestamp=base,
    )


def _fail(records: list[Pending], error: BaseException) -> None:
    for record in records:
        if not record.done.done():
            record.done.set_exception(error)
