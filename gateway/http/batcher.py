"""Coalescing HTTP records bound for one partition into idempotent, pipelined record batches:
Kafka's producer (`enable.idempotence=true`, `max.in.flight.requests.per.connection=5`,
a short `linger.ms`) for a server whose clients send one record per request.

Owns: `PartitionBatcher`. The worker has one idempotent producer id (`ProducerIds`: InitProducerId
once, again only to reset sequences); every batch carries it, its epoch and the partition's next
sequence number. Per fleet partition up to `MAX_IN_FLIGHT` Produce requests are at the broker at
once (one connection to the leader, which handles them in order); the first batch of a producer id
on a partition goes alone, so the broker knows the id before a second one can arrive. A lone
request is sent at once; while batches are in flight, records that arrive wait until a batch in
flight is answered, at most `LINGER_S` (or until `MAX_BATCH_RECORDS` / `MAX_BATCH_BYTES`), and go
together, so concurrent or streamed requests share one request and one append: the linger adapts
to the round trip (records wait no longer than one, so requests that all wait on the broker are
not held a fixed 5 ms more), and more than one batch is in flight only when the round trip is
longer than `LINGER_S` or batches fill. Each record learns its own offset (the batch's base
offset plus its index); answers are given in batch order.

A failed batch stops the partition's pipeline ("recovery"): once every batch in flight has
settled, the failed ones (and any after them) are sent again one at a time, in order, with
`produce` retrying retriable errors (after a metadata refresh) until `DELIVERY_TIMEOUT_S`:
- a batch resent with its producer id, epoch and sequence is appended once: the broker answers a
  duplicate of one of its last five batches with the original offsets (docs/gateway-http.md);
- a batch the broker refuses with a non-retriable error (e.g. one record over the topic's
  `max.message.bytes`) is sent again record by record, so one record never fails its neighbours;
- OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID or INVALID_PRODUCER_EPOCH for a batch whose
  predecessors are all settled fails that batch's records (their HTTP requests get a problem),
  takes a new producer id and sends the rest from sequence 0, as Kafka's producer does;
- a batch still failing at the delivery timeout fails its records (it may or may not have been
  written: 503, as Kafka's producer reports a delivery timeout) and takes a new producer id, so
  nothing sent later can be mistaken for it.
Every batch holds records of one tenant topic (the key is the prefixed fleet name), so tenants
never share a batch.

The state kept per partition is bounded: past `MAX_KNOWN_PARTITIONS` (a tenant creating, writing
and deleting topics all day adds partitions without end) every idle partition is forgotten and
the producer id retired, so that no partition's next batch can meet a sequence the broker has
already seen under it: the next batch anywhere asks for a new id and starts at sequence 0, as
after a reset. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from brokers.client.errors import BrokerResponseError, ClientError
from brokers.client.metadata import TopicPartition
from brokers.client.producer import ProduceResult
from brokers.records.builder import Row, build_rows_batch
from brokers.wire.errors import ErrorCode
from gateway.http import pending as entries
from gateway.http.pending import Entry, Pending, Run, RunResult

log = logging.getLogger(__name__)

MAX_BATCH_RECORDS = 500
MAX_BATCH_BYTES = 512 * 1024
MAX_IN_FLIGHT = 5  # Kafka's cap with idempotence: the broker dedups its last five batches
LINGER_S = 0.005  # how long records wait for company while batches are in flight (linger.ms)
DELIVERY_TIMEOUT_S = 30.0  # a failed batch is retried this long (Kafka's delivery.timeout.ms)
SEQUENCE_LIMIT = 2**31  # sequences are int32 and wrap to 0
MAX_KNOWN_PARTITIONS = 10_000  # then idle partitions are forgotten (module docstring)
_RESET = frozenset(
    {
        ErrorCode.out_of_order_sequence_number,
        ErrorCode.unknown_producer_id,
        ErrorCode.invalid_producer_epoch,
    }
)
Producer = tuple[int, int]  # (producer id, epoch)
# Send one batch: `retry` False is one attempt (pipelined); True retries retriable errors.
Send = Callable[[TopicPartition, bytes, bool], Awaitable[ProduceResult]]
InitProducerId = Callable[[], Awaitable[Producer]]


@dataclass(slots=True)
class _Batch:
    records: list[Entry]
    producer: Producer
    sequence: int
    task: asyncio.Future[ProduceResult] | None = None


@dataclass(slots=True)
class _Partition:
    queue: deque[Entry] = field(default_factory=deque)
    in_flight: deque[_Batch] = field(default_factory=deque)
    producer: Producer | None = None
    sequence: int = 0  # the next sequence number of `producer` on this partition
    confirmed: bool = False  # the broker acknowledged a batch of `producer` here: pipeline
    recovering: bool = False
    linger: asyncio.TimerHandle | None = None
    queued_bytes: int = 0
    queued_records: int = 0


class ProducerIds:
    """The worker's idempotent producer id: asked for once, renewed only to reset sequences."""

    def __init__(self, init: InitProducerId) -> None:
        self._init = init
        self.current: Producer | None = None
        self._asking: asyncio.Future[Producer] | None = None

    async def get(self) -> Producer:
        return self.current if self.current is not None else await self.renew(None)

    async def renew(self, stale: Producer | None) -> Producer:
        """A producer id other than `stale` (a new one unless another partition renewed it)."""
        if self.current is not None and self.current != stale:
            return self.current
        if self._asking is None:
            self._asking = asyncio.ensure_future(self._init())
            asking = self._asking
            try:
                self.current = await asking
                log.info("event=http_producer_id producer_id=%d epoch=%d", *self.current)
            finally:
                self._asking = None
            return self.current
        return await asyncio.shield(self._asking)


class PartitionBatcher:
    def __init__(
        self, send: Send, ids: ProducerIds, *, max_partitions: int = MAX_KNOWN_PARTITIONS
    ) -> None:
        self._send = send
        self._ids = ids
        self._max_partitions = max_partitions
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._tasks: set[asyncio.Future[object]] = set()

    def append(self, tp: TopicPartition, row: Row) -> asyncio.Future[ProduceResult]:
        """Queue one record; the future gets its own offset (as `ProduceResult.base_offset`)."""
        done: asyncio.Future[ProduceResult] = asyncio.get_running_loop().create_future()
        part = self._partition(tp)
        self._queue(part, entries.pending(row, done))
        self._pump(tp, part)
        return done

    def append_runs(
        self, runs: list[tuple[TopicPartition, list[Row]]]
    ) -> list[asyncio.Future[RunResult]]:
        """Queue runs of records (a stream's chunk), each of at most `MAX_BATCH_RECORDS` for one
        partition and never split between batches, pumping each partition once; each run's
        future says where its records landed."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[RunResult]] = []
        touched: dict[TopicPartition, _Partition] = {}
        for tp, rows in runs:
            assert 0 < len(rows) <= MAX_BATCH_RECORDS
            part = touched[tp] = self._partition(tp)
            done: asyncio.Future[RunResult] = loop.create_future()
            self._queue(part, entries.run(rows, done))
            futures.append(done)
        for tp, part in touched.items():
            self._pump(tp, part)
        return futures

    def _partition(self, tp: TopicPartition) -> _Partition:
        part = self._partitions.get(tp)
        if part is None:
            if len(self._partitions) >= self._max_partitions:
                self._forget_idle()
            part = self._partitions[tp] = _Partition()
        return part

    def _forget_idle(self) -> None:
        """Drop every idle partition's state and retire the producer id (module docstring)."""
        idle = [
            tp
            for tp, part in self._partitions.items()
            if not (part.queue or part.in_flight or part.recovering or part.linger is not None)
        ]
        for tp in idle:
            del self._partitions[tp]
        if idle:
            self._ids.current = None  # the next batch anywhere takes a new id, from sequence 0
            log.info("event=http_producer_partitions_forgotten count=%d", len(idle))

    @staticmethod
    def _queue(part: _Partition, entry: Pending | Run) -> None:
        part.queue.append(entry)
        part.queued_bytes += entry.size
        part.queued_records += entry.count

    # -- the pipeline ---------------------------------------------------------------------------
    def _pump(self, tp: TopicPartition, part: _Partition, *, lingered: bool = False) -> None:
        """Send what may go now: batches while fewer than the cap are in flight."""
        if part.recovering or part.linger is not None:
            return  # recovery pumps when it ends, a lingering batch when its time is up
        producer = self._ids.current
        if producer is None:
            if part.queue:
                self._spawn(self._first_id(tp, part))
            return
        while part.queue and len(part.in_flight) < (MAX_IN_FLIGHT if part.confirmed else 1):
            full = part.queued_records >= MAX_BATCH_RECORDS or part.queued_bytes >= MAX_BATCH_BYTES
            if part.in_flight and not lingered and not full:
                loop = asyncio.get_running_loop()
                part.linger = loop.call_later(LINGER_S, self._lingered, tp, part)
                return
            lingered = False
            if part.producer != producer and not part.in_flight:  # a new id starts at 0
                part.producer, part.sequence, part.confirmed = producer, 0, False
            assert part.producer is not None
            batch = _Batch(_take(part), part.producer, part.sequence)
            part.sequence = (part.sequence + entries.count(batch.records)) % SEQUENCE_LIMIT
            part.in_flight.append(batch)
            batch.task = asyncio.ensure_future(self._send(tp, _build(batch), False))
            batch.task.add_done_callback(lambda _t: self._settled(tp, part))

    def _lingered(self, tp: TopicPartition, part: _Partition) -> None:
        part.linger = None
        self._pump(tp, part, lingered=True)

    async def _first_id(self, tp: TopicPartition, part: _Partition) -> None:
        try:
            await self._ids.get()
        except Exception as exc:  # no id, no produce: every waiting request hears why
            log.warning("event=http_producer_id_failed error=%s", type(exc).__name__)
            entries.fail(list(part.queue), exc)
            part.queue.clear()
            part.queued_bytes = part.queued_records = 0
        self._pump(tp, part)

    def _settled(self, tp: TopicPartition, part: _Partition) -> None:
        """Answer the batches at the head that succeeded; a failure starts recovery. A batch
        answered ends the linger of the records waiting behind it: they go at once."""
        answered = False
        while part.in_flight and not part.recovering:
            head = part.in_flight[0]
            assert head.task is not None
            if not head.task.done():
                break
            if head.task.cancelled() or head.task.exception() is not None:
                part.recovering = True
                self._spawn(self._recover(tp, part))
                return
            part.in_flight.popleft()
            answered = True
            if head.producer == part.producer:
                part.confirmed = True
            entries.answer(head.records, head.task.result())
        if answered and part.linger is not None:
            part.linger.cancel()
            part.linger = None
            self._pump(tp, part, lingered=True)
            return
        self._pump(tp, part)

    # -- recovery -------------------------------------------------------------------------------
    async def _recover(self, tp: TopicPartition, part: _Partition) -> None:
        """Settle every batch in flight, then send the unanswered ones again, in order."""
        batches: list[_Batch] = []  # taken out of `in_flight`: failed too if the resend fails
        try:
            await asyncio.wait([b.task for b in part.in_flight if b.task is not None])
            batches = list(part.in_flight)
            part.in_flight.clear()
            producer, sequence = batches[0].producer, batches[0].sequence
            confirmed = False
            for batch in batches:
                producer, sequence, confirmed = await self._resend(
                    tp, batch, producer, sequence, confirmed
                )
            part.producer, part.sequence = producer, sequence
            part.confirmed = confirmed or (part.confirmed and producer == batches[0].producer)
        except Exception as exc:  # never leave a waiting request hanging
            log.exception("event=http_produce_recovery_failed topic_partition=%s", tp)
            for batch in (*batches, *part.in_flight):
                entries.fail(batch.records, exc)  # the answered ones are skipped
            part.in_flight.clear()
            if self._ids.current == part.producer:
                self._ids.current = None  # start afresh under a new id
            part.producer = None
        finally:
            part.recovering = False
            self._pump(tp, part)

    async def _resend(
        self,
        tp: TopicPartition,
        batch: _Batch,
        producer: Producer,
        sequence: int,
        confirmed: bool,
    ) -> tuple[Producer, int, bool]:
        """Send one batch of the recovery at (`producer`, `sequence`); where the next goes."""
        assert batch.task is not None
        if not batch.task.cancelled() and batch.task.exception() is None:
            entries.answer(batch.records, batch.task.result())  # it landed: a later one failed
            return producer, (sequence + entries.count(batch.records)) % SEQUENCE_LIMIT, True
        pending = [r for r in batch.records if not r.done.done()]
        if not pending:
            return producer, sequence, confirmed
        chunks = [pending]
        while chunks:
            records = chunks.pop(0)
            attempt = _Batch(records, producer, sequence)
            try:
                result = await self._deliver(tp, attempt)
            except BrokerResponseError as exc:
                if exc.code in _RESET:
                    log.warning(
                        "event=http_produce_sequence_reset topic_partition=%s error=%s", tp, exc
                    )
                    entries.fail(records, exc)
                    producer, sequence, confirmed = await self._ids.renew(producer), 0, False
                    continue
                if entries.count(records) > 1 and not exc.retriable:  # one bad record must not
                    chunks[:0] = [[r] for r in entries.one_by_one(records)]  # fail the rest
                    continue
                entries.fail(records, exc)
                if exc.retriable:  # in doubt: nothing later may share its sequence range
                    producer, sequence, confirmed = await self._ids.renew(producer), 0, False
                continue
            except ClientError as exc:
                entries.fail(records, exc)
                if exc.retriable:
                    producer, sequence, confirmed = await self._ids.renew(producer), 0, False
                continue
            entries.answer(records, result)
            sequence, confirmed = (sequence + entries.count(records)) % SEQUENCE_LIMIT, True
        return producer, sequence, confirmed

    async def _deliver(self, tp: TopicPartition, batch: _Batch) -> ProduceResult:
        """Send with retries until `DELIVERY_TIMEOUT_S` (the broker may be restarting)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DELIVERY_TIMEOUT_S
        data = _build(batch)
        while True:
            try:
                return await self._send(tp, data, True)
            except ClientError as exc:
                if not exc.retriable or loop.time() >= deadline:
                    raise
                log.info("event=http_produce_retry topic_partition=%s error=%s", tp, exc)
                await asyncio.sleep(0.2)

    def _spawn(self, work: Awaitable[None]) -> None:
        task: asyncio.Future[object] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _take(part: _Partition) -> list[Entry]:
    """Whole entries from the head of the queue, within the batch's records and bytes (the
    first always: a run or a record larger than the bytes goes alone)."""
    queue = part.queue
    taken: list[Entry] = []
    size = records = 0
    while queue:
        head = queue[0]
        if taken and (
            records + head.count > MAX_BATCH_RECORDS or size + head.size > MAX_BATCH_BYTES
        ):
            break
        taken.append(queue.popleft())
        size += head.size
        records += head.count
    part.queued_bytes -= size
    part.queued_records -= records
    return taken


def _build(batch: _Batch) -> bytes:
    return build_rows_batch(
        entries.rows(batch.records),
        producer_id=batch.producer[0],
        producer_epoch=batch.producer[1],
        base_sequence=batch.sequence,
    )
