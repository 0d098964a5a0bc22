"""Writes usage records to `__usage`: traffic windows cut from the meter, and storage samples.

Owns: `UsageWriter`: creating `__usage` if it is missing, the flush loop (every `interval_s` and
exactly at each UTC hour boundary: cut the meter, write), and the records not yet written. Each
`__usage` partition (`partition_for(tenant)`) has a queue; a round sends each queue's oldest
records as one batch with the idempotent producer (key = record id, value = `tenancy.usage.encode`).
A batch that fails stays as it is and is sent again, unchanged, next round, so a batch that did
land is deduplicated by the broker (same producer id and sequence); should it be trimmed or the
producer replaced meanwhile, the copy that lands twice has the same ids and billing counts it once.
Beyond `max_pending` records the oldest are dropped and counted as lost.

Failure contract: a gateway that crashes loses at most what it had not flushed (its current window
and pending records): under-billing, never double billing (docs/gateway.md, "Usage"). `stop()`
makes a last cut and flush, bounded by `stop_timeout_s`; what it cannot write is counted as lost.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from itertools import count

from prometheus_client import CollectorRegistry

from brokers.client import Cluster, IdempotentProducer, TopicPartition
from brokers.client.errors import ClientError
from brokers.client.idempotent_producer import wall_ms
from gateway.metering.meter import UsageMeter
from gateway.metering.metrics import UsageMetrics
from gateway.metering.pending import Entry, PartitionQueue
from gateway.metering.usage_topic import ensure_usage_topic
from tenancy.usage import (
    DEFAULT_PARTITIONS,
    HOUR_MS,
    USAGE_TOPIC,
    UsageRecord,
    UsageRecordError,
    encode,
    partition_for,
    window_end_limit,
)

log = logging.getLogger(__name__)
MAX_BATCH_RECORDS = 1000  # ~0.4 MB of JSON: well under the default max.message.bytes


class UsageWriter:
    def __init__(
        self,
        cluster: Cluster,
        meter: UsageMeter,
        *,
        registry: CollectorRegistry,
        interval_s: float = 5.0,
        partitions: int = DEFAULT_PARTITIONS,
        replication_factor: int | None = None,
        clock_ms: Callable[[], int] = wall_ms,
        max_pending: int = 100_000,
        stop_timeout_s: float = 10.0,
    ) -> None:
        self._cluster = cluster
        self._meter = meter
        self._interval_ms = max(1, round(interval_s * 1000))
        self._partitions = partitions
        self._replication_factor = replication_factor
        self._clock_ms = clock_ms
        self._max_pending = max_pending
        self._stop_timeout_s = stop_timeout_s
        self._producer = IdempotentProducer(cluster, clock_ms=clock_ms)
        self._metrics = UsageMetrics(registry)
        self._queues: dict[int, PartitionQueue] = {}
        self._arrivals = count()
        self._flushing = asyncio.Lock()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def pending(self) -> int:
        return sum(len(q) for q in self._queues.values())

    async def start(self) -> None:
        """Make sure `__usage` exists (its real partition count wins), then start flushing."""
        self._partitions = await ensure_usage_topic(
            self._cluster, self._partitions, self._replication_factor
        )
        self._task = asyncio.create_task(self._run(), name="usage-writer")

    async def stop(self) -> None:
        """Stop the loop, then a last cut and flush within `stop_timeout_s`."""
        self._stopping.set()
        try:
            async with asyncio.timeout(self._stop_timeout_s):
                if self._task is not None:
                    await self._task
                await self.flush(self._clock_ms())
        except TimeoutError:
            log.warning("usage writer stop timed out pending=%d", self.pending)
        finally:
            if self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
        lost = self.pending
        if lost:
            log.warning("usage records lost at stop count=%d", lost)
            self._metrics.lost.inc(lost)
            self._queues.clear()
            self._metrics.pending.set(0)

    def submit(self, records: Iterable[UsageRecord]) -> None:
        """Queue records (storage samples) for the next flush."""
        for record in records:
            try:
                key, value = encode(record)
            except UsageRecordError as exc:
                log.error("usage record refused id=%r reason=%s", record.id, exc.reason)
                self._metrics.lost.inc()
                continue
            partition = partition_for(record.tenant, self._partitions)
            queue = self._queues.setdefault(partition, PartitionQueue())
            queue.waiting.append(Entry(next(self._arrivals), key, value))
        self._drop_beyond_limit()
        self._metrics.pending.set(self.pending)

    async def flush(self, now_ms: int) -> bool:
        """Cut the meter at `now_ms` and write everything pending; True if all was written."""
        async with self._flushing:
            self.submit(self._meter.cut(now_ms))
            partitions = [p for p, q in self._queues.items() if len(q)]
            results = await asyncio.gather(*(self._drain(p) for p in partitions))
            self._metrics.pending.set(self.pending)
            if all(results):
                self._metrics.last_flush.set(self._clock_ms() / 1000)
                return True
            self._metrics.flush_failures.inc()
            return False

    async def _drain(self, partition: int) -> bool:
        queue = self._queues[partition]
        tp = TopicPartition(USAGE_TOPIC, partition)
        while queue.next_batch(MAX_BATCH_RECORDS):
            batch, written = queue.in_flight, False
            try:
                await self._producer.send(tp, [(e.key, e.value) for e in batch])
                written = True
            except ClientError as exc:
                log.warning(
                    "usage write failed partition=%d records=%d error=%s",
                    partition,
                    len(batch),
                    exc,
                )
                return False
            finally:
                queue.settled(batch, written=written)
            self._metrics.written.inc(len(batch))
        return True

    def _drop_beyond_limit(self) -> None:
        excess = self.pending - self._max_pending
        while excess > 0:
            oldest = min(
                (q for q in self._queues.values() if q.droppable()),
                key=lambda q: q.oldest_arrival(),
                default=None,
            )
            if oldest is None:
                return
            oldest.drop_oldest()
            self._metrics.lost.inc()
            excess -= 1

    async def _run(self) -> None:
        while not self._stopping.is_set():
            now = self._clock_ms()
            target = min(now + self._interval_ms, window_end_limit(now))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0, target - now) / 1000):
                    await self._stopping.wait()
            if self._stopping.is_set():
                return
            now = self._clock_ms()
            at = target if target % HOUR_MS == 0 and now >= target else now
            try:
                await self.flush(at)
            except Exception:  # the loop must outlive any one bad round
                log.exception("usage flush round failed")
