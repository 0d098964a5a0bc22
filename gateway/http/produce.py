"""Producing over HTTP: one record per request, or a stream of them on one connection.

Owns: `HttpProducer` — `prepare` applies the Kafka path's rules to one record, asking the same
policy stage (`TenantPolicy.produce_refusals`: a legal topic name, WRITE on the topic, the tenant's
`max_request_bytes` and storage limit; each refusal mapped to a problem: 400 40002, 403 40301, 413
41301, 403 40302), the producer byte-rate quota charged with the request's bytes through the same
`GatewayThrottling` (the caller delays
the answer by the throttle time it earns, so a tenant is never answered faster than its quota; a
request larger than the quota allows in a whole window is refused at once with 429 and
`Retry-After`); `send` hands the record to the `PartitionBatcher`, which appends it with acks=all
through the fleet client, in one batch with the records of other requests for the same partition
that arrived while the previous batch was at the broker. Usage: the request's bytes as
`bytes_in` and one request, on the topic. Partition counts come from the fleet client's metadata;
a topic not in it is waited for up to `TOPIC_WAIT_S` (`gateway.http.topic_metadata`), as a Kafka
producer waits for a new topic's metadata, so a produce right after the topic's creation succeeds
and one to a topic that does not exist is 404 after that bound. Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

import asyncio
import json
import math
import operator
from dataclasses import dataclass
from typing import Any

from brokers.client.errors import ClientError, UnknownTopicError
from brokers.client.metadata import TopicPartition
from brokers.client.producer import ProduceResult
from brokers.records.builder import Row
from gateway.http import fleet_produce
from gateway.http.batcher import MAX_BATCH_BYTES, MAX_BATCH_RECORDS, PartitionBatcher, ProducerIds
from gateway.http.context import Caller, HttpServices
from gateway.http.errors import PARTITION_NOT_FOUND, TOPIC_NOT_FOUND, ApiError, from_client
from gateway.http.pending import OVERHEAD_BYTES, RunResult
from gateway.http.records import ProduceRecord, RoundRobin, choose_partition, iso_ms
from gateway.http.topic_metadata import TopicMetadata
from gateway.policy import Reason, Refusal

# How long a produce waits for a topic it does not see before answering 404: Kafka's producer
# blocks on an unknown topic's metadata for max.block.ms (60 s); a REST answer should come sooner.
TOPIC_WAIT_S = 3.0
# How long a produce waits for metadata while no broker answers (one restarting), retrying every
# FLEET_RETRY_S, before answering 503 (Kafka's producer blocks up to max.block.ms, 60 s).
FLEET_WAIT_S = 30.0
FLEET_RETRY_S = 0.2
_KEY, _VALUE = operator.itemgetter(0), operator.itemgetter(1)  # of an Row
MAX_TEMPLATES = 1024  # answer templates kept (one per topic answered lately)


class HttpProducer:
    def __init__(self, services: HttpServices) -> None:
        self._services = services
        self._round_robin = RoundRobin()
        cluster = services.cluster
        ids = ProducerIds(lambda: fleet_produce.init_producer_id(cluster))
        self._batcher = PartitionBatcher(
            lambda tp, batch, retry: fleet_produce.send(cluster, tp, batch, retry), ids
        )
        self.topics = TopicMetadata(services.cluster)
        self._answers: dict[tuple[str, str], AnswerLines] = {}  # (cluster id, topic): template

    async def partitions(self, caller: Caller, topic: str) -> int:
        """The partition count of the tenant's topic; 404 when it is not seen within
        `TOPIC_WAIT_S` (a topic created a moment ago may not be in the metadata yet)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FLEET_WAIT_S
        while True:
            try:
                return await self.topics.partitions(caller.fleet(topic), TOPIC_WAIT_S)
            except UnknownTopicError:
                raise ApiError(404, f"topic {topic!r} not found", TOPIC_NOT_FOUND) from None
            except ClientError as exc:
                if not exc.retriable or loop.time() >= deadline:
                    raise ApiError(
                        503, f"the fleet did not answer: {type(exc).__name__}", 50003, 1
                    ) from None
            await asyncio.sleep(FLEET_RETRY_S)  # a broker restarting: wait, as max.block.ms

    def check_quota_size(self, caller: Caller, request_bytes: int) -> None:
        most = caller.policy.produce_window_bytes(caller.subject)
        if most is not None and request_bytes > most:
            window_s = max(1, math.ceil(self._services.settings.quota_window_ms / 1000))
            raise ApiError(
                429,
                f"a request of {request_bytes} bytes exceeds what the producer quota allows in "
                f"its window ({most} bytes)",
                42901,
                retry_after_s=window_s,
            )

    def authorize(self, caller: Caller, topic: str) -> None:
        """A request's one decision on its topic, before a byte of its body is read: a legal
        name, then WRITE (400 40002, 403 40301). `prepare(..., authorized=True)` then checks
        only the size and the storage, once the body is read."""
        refusal = caller.policy.topic_write_refusal(topic)
        if refusal is not None:
            raise _problem(refusal, topic)

    def check_limits(
        self, caller: Caller, topic: str, request_bytes: int, *, authorized: bool = False
    ) -> None:
        policy = caller.policy
        if authorized:
            refusal = policy.produce_limit_refusal(request_bytes)
        else:
            refusal = policy.produce_refusals((topic,), request_bytes).get(topic)
        if refusal is not None:
            raise _problem(refusal, topic)
        self.check_quota_size(caller, request_bytes)

    async def prepare(
        self,
        caller: Caller,
        topic: str,
        record: ProduceRecord,
        request_bytes: int,
        *,
        authorized: bool = False,
    ) -> tuple[Prepared, int]:
        """Check one record against the rules and charge it: the batch to send, and the
        throttle (ms) it earned, which the caller waits before answering or reading more.
        `authorized`: `authorize` passed for this request's topic (it is not asked again)."""
        await caller.policy.lease_storage(request_bytes)  # storage headroom from the store
        self.check_limits(caller, topic, request_bytes, authorized=authorized)
        count = await self.partitions(caller, topic)
        partition = choose_partition(record, topic, count, self._round_robin)
        if partition >= count:
            raise _no_partition(partition, topic)
        now = self._services.session.clock_ms()
        timestamp = record.timestamp_ms if record.timestamp_ms is not None else now
        throttle = caller.policy.charge_produce(caller.subject, request_bytes)
        caller.meter(topic, bytes_in=request_bytes, requests=1, throttle_ms=throttle)
        return Prepared(topic, partition, timestamp, record), throttle

    async def prepare_many(
        self, caller: Caller, topic: str, records: list[tuple[ProduceRecord, int]]
    ) -> tuple[list[Prepared | ApiError], int]:
        """`prepare` for the records a stream's chunk completed, each with its size: the same
        rules, applied once for them all when they all pass (one storage lease and charge, one
        quota charge and one meter count for their total), else record by record. Each
        record's `Prepared`, or the problem that refused it, in order; the throttle (ms)."""
        sizes = [size for _, size in records]
        total, largest = sum(sizes), max(sizes)
        policy = caller.policy
        await policy.lease_storage(total)
        most = policy.produce_window_bytes(caller.subject)
        refusal = (
            None
            if most is not None and largest > most
            else policy.produce_refusals((topic,), total, largest_bytes=largest).get(topic)
        )
        if refusal is not None or (most is not None and largest > most):
            return await self._prepare_each(caller, topic, records)
        try:
            count = await self.partitions(caller, topic)
        except ApiError as exc:  # no such topic (404) or no fleet (503): each record hears it
            caller.meter(topic, bytes_in=total, requests=len(records))
            return [exc] * len(records), 0
        now = self._services.session.clock_ms()
        out: list[Prepared | ApiError] = []
        for record, _size in records:
            partition = choose_partition(record, topic, count, self._round_robin)
            if partition >= count:
                out.append(_no_partition(partition, topic))
                continue
            stamp = record.timestamp_ms if record.timestamp_ms is not None else now
            out.append(Prepared(topic, partition, stamp, record))
        throttle = policy.charge_produce(caller.subject, total)
        caller.meter(topic, bytes_in=total, requests=len(records), throttle_ms=throttle)
        return out, throttle

    async def admit_columns(
        self, caller: Caller, topic: str, partitions: list[int | None], sizes: list[int]
    ) -> tuple[list[int], int, int] | ApiError | None:
        """`prepare_many` for a chunk read as columns (`stream_columns`), when its records all
        pass together: each record's partition (its own, or the partitioner's), the time stamped
        on them, and the throttle (ms); the storage leased and charged, the quota charged and the
        usage metered for them all. The problem every record hears when the topic is not found
        (404) or the fleet does not answer (503), as `prepare_many` (not waited for twice). None
        when they do not all pass (a refusal, a partition the topic does not have): nothing is
        charged, and the record-by-record path answers each."""
        try:
            count = await self.partitions(caller, topic)
        except ApiError as exc:
            caller.meter(topic, bytes_in=sum(sizes), requests=len(sizes))
            return exc
        if max((p for p in partitions if p is not None), default=0) >= count:
            return None
        total, largest = sum(sizes), max(sizes)
        policy = caller.policy
        await policy.lease_storage(total)
        most = policy.produce_window_bytes(caller.subject)
        if most is not None and largest > most:
            return None
        if policy.produce_refusals((topic,), total, largest_bytes=largest):
            return None
        round_robin = self._round_robin
        chosen = [round_robin.partition(topic, count) if p is None else p for p in partitions]
        throttle = policy.charge_produce(caller.subject, total)
        caller.meter(topic, bytes_in=total, requests=len(sizes), throttle_ms=throttle)
        return chosen, self._services.session.clock_ms(), throttle

    async def _prepare_each(
        self, caller: Caller, topic: str, records: list[tuple[ProduceRecord, int]]
    ) -> tuple[list[Prepared | ApiError], int]:
        out: list[Prepared | ApiError] = []
        throttle = 0
        for record, size in records:
            try:
                prepared, earned = await self.prepare(caller, topic, record, size)
            except ApiError as exc:
                caller.meter(topic, bytes_in=size, requests=1)
                out.append(exc)
                continue
            out.append(prepared)
            throttle = max(throttle, earned)
        return out, throttle

    def enqueue_runs(
        self, caller: Caller, outcomes: list[Prepared | ApiError]
    ) -> tuple[list[asyncio.Future[RunResult]], list[tuple[int, int] | None]]:
        """`enqueue_rows` for a chunk's prepared records; a refusal's place is None."""
        ready = [p for p in outcomes if isinstance(p, Prepared)]
        rows: list[Row] = []
        for p in ready:
            key, value = p.record.key, p.record.value
            rows.append(
                (
                    None if key is None else key.data,
                    None if value is None else value.data,
                    p.record.headers,
                    p.timestamp_ms,
                )
            )
        topic = ready[0].topic if ready else ""
        futures, places = self.enqueue_rows(caller, topic, [p.partition for p in ready], rows)
        found = iter(places)
        return futures, [next(found) if isinstance(p, Prepared) else None for p in outcomes]

    def enqueue_rows(
        self, caller: Caller, topic: str, partitions: list[int], rows: list[Row]
    ) -> tuple[list[asyncio.Future[RunResult]], list[tuple[int, int]]]:
        """Hand a stream's chunk to the batcher as runs: its records for one partition together
        (at most `MAX_BATCH_RECORDS` and `MAX_BATCH_BYTES` a run), one future per run. The
        futures, and each record's place: its run, its index in it."""
        if not rows:
            return [], []
        if len(set(partitions)) == 1:
            whole = self._one_partition(caller, topic, partitions[0], rows)
            if whole is not None:
                spots = [
                    (index, at) for index, run in enumerate(whole) for at in range(len(run[1]))
                ]
                return self._batcher.append_runs(whole), spots
        runs: list[tuple[TopicPartition, list[Row]]] = []
        open_runs: dict[int, tuple[int, int]] = {}  # partition: its last run, that run's bytes
        places: list[tuple[int, int]] = []
        fleet = caller.fleet(topic)
        for partition, row in zip(partitions, rows, strict=True):
            size = len(row[0] or b"") + len(row[1] or b"") + OVERHEAD_BYTES
            index, held = open_runs.get(partition, (-1, 0))
            if index < 0 or len(runs[index][1]) >= MAX_BATCH_RECORDS or held >= MAX_BATCH_BYTES:
                index, held = len(runs), 0
                runs.append((TopicPartition(fleet, partition), []))
            run = runs[index][1]
            places.append((index, len(run)))
            run.append(row)
            open_runs[partition] = (index, held + size)
        return self._batcher.append_runs(runs), places

    def _one_partition(
        self, caller: Caller, topic: str, partition: int, rows: list[Row]
    ) -> list[tuple[TopicPartition, list[Row]]] | None:
        """The runs of rows all bound for one partition: slices of `MAX_BATCH_RECORDS`, when
        each is within `MAX_BATCH_BYTES` (else None: `enqueue_rows` cuts them by bytes)."""
        tp = TopicPartition(caller.fleet(topic), partition)
        runs = [
            (tp, rows[i : i + MAX_BATCH_RECORDS]) for i in range(0, len(rows), MAX_BATCH_RECORDS)
        ]
        for _tp, run in runs:  # the sizes summed in C: no Python per record
            keys = sum(map(len, filter(None, map(_KEY, run))))
            values = sum(map(len, filter(None, map(_VALUE, run))))
            if keys + values + OVERHEAD_BYTES * len(run) > MAX_BATCH_BYTES:
                return None
        return runs

    def enqueue(self, caller: Caller, prepared: Prepared) -> asyncio.Future[ProduceResult]:
        """Hand a prepared record to the batcher (acks=all); its result, or the ClientError
        that failed it (`failed` maps that to the answer), comes in the future."""
        record = prepared.record
        key, value = record.key, record.value
        return self._batcher.append(
            TopicPartition(caller.fleet(prepared.topic), prepared.partition),
            (
                None if key is None else key.data,
                None if value is None else value.data,
                record.headers,
                prepared.timestamp_ms,
            ),
        )

    async def send(self, caller: Caller, cluster_id: str, prepared: Prepared) -> bytes:
        """Append a prepared record (acks=all); Confluent's ProduceResponse, as JSON."""
        try:
            result = await self.enqueue(caller, prepared)
        except ClientError as exc:
            raise failed(exc, prepared) from None
        return self.answers(cluster_id, prepared.topic).json(prepared, result)

    def answers(self, cluster_id: str, topic: str) -> AnswerLines:
        """A topic's answer template (kept for the last `MAX_TEMPLATES` topics answered)."""
        key = (cluster_id, topic)
        template = self._answers.get(key)
        if template is None:
            if len(self._answers) >= MAX_TEMPLATES:
                del self._answers[next(iter(self._answers))]  # the oldest
            template = self._answers[key] = AnswerLines(cluster_id, topic)
        return template


def _no_partition(partition: int, topic: str) -> ApiError:
    return ApiError(404, f"partition {partition} of topic {topic!r} not found", PARTITION_NOT_FOUND)


def failed(error: ClientError, prepared: Prepared) -> ApiError:
    """The problem for a record the fleet did not take."""
    return from_client(error, f"topic {prepared.topic!r} partition {prepared.partition}")


def answer(cluster_id: str, prepared: Prepared, result: ProduceResult) -> dict[str, Any]:
    """Confluent's ProduceResponse for a record appended at `result`."""
    stamp = result.log_append_time_ms if result.log_append_time_ms >= 0 else prepared.timestamp_ms
    body: dict[str, Any] = {
        "error_code": 200,
        "cluster_id": cluster_id,
        "topic_name": prepared.topic,
        "partition_id": prepared.partition,
        "offset": result.base_offset,
        "timestamp": iso_ms(stamp),
    }
    for name, part in (("key", prepared.record.key), ("value", prepared.record.value)):
        if part is not None:
            body[name] = {"type": part.type, "size": len(part.data or b"")}
    return body


class AnswerLines:
    """A topic's answers, one JSON line each, as `json.dumps(answer(...), separators=(",",
    ":"))` writes them, but formatted from a prefix made once per stream or topic (no dict, no
    encoder per record: a record is answered in ≈ 1 µs instead of ≈ 4)."""

    def __init__(self, cluster_id: str, topic: str) -> None:
        self._prefix = (
            f'{{"error_code":200,"cluster_id":{json.dumps(cluster_id)},'
            f'"topic_name":{json.dumps(topic)},"partition_id":'
        )
        self._stamp = (-1, "")  # the last timestamp formatted (a batch's records share theirs)

    def json(self, prepared: Prepared, result: ProduceResult) -> bytes:
        """The answer to a single-record request: its line without the newline."""
        return self.line(prepared, result)[:-1].encode()

    def line(self, prepared: Prepared, result: ProduceResult) -> str:
        return self.line_at(prepared, result.base_offset, result.log_append_time_ms)

    def plain_lines(
        self, partition: int, first: ProduceResult, stamp_ms: int, kind: str, sizes: list[int]
    ) -> list[str]:
        """The lines of a run of records with a value each and nothing else (`stream_columns`),
        the first at `first`: what `line` writes for each, in one pass."""
        appended = first.log_append_time_ms
        stamp = appended if appended >= 0 else stamp_ms
        if stamp != self._stamp[0]:
            self._stamp = (stamp, iso_ms(stamp))
        head = f'{self._prefix}{partition},"offset":'
        tail = f',"timestamp":"{self._stamp[1]}","value":{{"type":"{kind}","size":'
        base = first.base_offset
        return [f"{head}{base + i}{tail}{size}}}}}\n" for i, size in enumerate(sizes)]

    def line_at(self, prepared: Prepared, offset: int, log_append_time_ms: int) -> str:
        """`line` for a record at `offset` (no `ProduceResult` made per streamed record)."""
        stamp = log_append_time_ms if log_append_time_ms >= 0 else prepared.timestamp_ms
        if stamp != self._stamp[0]:
            self._stamp = (stamp, iso_ms(stamp))
        parts = [
            self._prefix,
            f'{prepared.partition},"offset":{offset},"timestamp":"{self._stamp[1]}"',
        ]
        record = prepared.record
        for name, part in (("key", record.key), ("value", record.value)):
            if part is not None:  # `type` is one of BINARY, JSON, STRING: nothing to escape
                parts.append(f',"{name}":{{"type":"{part.type}","size":{len(part.data or b"")}}}')
        parts.append("}\n")
        return "".join(parts)


@dataclass(slots=True)  # not frozen: one per streamed record, a frozen __init__ costs more
class Prepared:
    topic: str
    partition: int
    timestamp_ms: int
    record: ProduceRecord


_PROBLEMS = {
    Reason.INVALID_NAME: (400, 40002),
    Reason.NOT_AUTHORIZED: (403, 40301),
    Reason.TOO_LARGE: (413, 41301),
    Reason.STORAGE_FULL: (403, 40302),
    Reason.STORAGE_BUSY: (503, 50003),  # headroom being leased from the tenant store: retry
}


def _problem(refusal: Refusal, topic: str) -> ApiError:
    """The HTTP problem for a policy refusal of a produce to `topic`."""
    status, code = _PROBLEMS[refusal.reason]
    message = refusal.message or f"not authorized to WRITE topic {topic!r}"
    if refusal.reason is Reason.INVALID_NAME:
        message = f"topic {topic!r}: {message}"
    return ApiError(status, message, code)
