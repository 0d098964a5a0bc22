"""Produce (key 0): append each partition's batches as leader and answer per partition.

Versions 0–2 are advertised (librdkafka's feature probes read the range) and answered with
UNSUPPORTED_VERSION per partition, since only magic v2 batches are stored (docs/design.md, "Produce"). acks=0
gets no response; if such a request fails, the connection is closed so the client notices, as
Kafka does. The request is read raw (`brokers.wire.produce_request`, `Route.decode`): each record
set stays a view of the request's buffer, opaque unless validation must look inside (below).

acks=all (Kafka's DelayedProduce): every partition is appended first (`min.insync.replicas` is
checked before the write: NOT_ENOUGH_REPLICAS), then the request parks in the purgatory on those
partitions until each one's high watermark passes its append (`Partition.acks_all_outcome`:
done, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank meanwhile), leadership is lost
(NOT_LEADER_OR_FOLLOWER) or the request's timeout passes (REQUEST_TIMED_OUT). A standalone
partition's high watermark is its log end, so acks=all completes at once without parking.

Validation and re-encoding (`brokers.records.prepare`): a batch the loop can check in about a
millisecond is checked inline (`prepare_append(inline=True)`: uncompressed up to 1 MiB, small
compressed ones); anything heavier — large compressed batches, decompression bombs, re-encoding
to the topic's `compression.type` — runs on a pool of PREPARE_WORKERS threads while the loop
serves everyone else (Kafka's request handler threads). The pool bounds the memory such work
takes (each thread at most pier.batch.max.decompressed.bytes plus max.message.bytes). A
connection sends one request at a time, so its appends keep their order; the partition checks
leadership and the ISR again after the hop. A record-level refusal names the record in
`record_errors` (v8+), as Kafka's RecordValidationException does.

Transaction verification (KIP-890 part 1, Kafka's `transaction.partition.verification.enable`):
a request with a transactional id whose first batch on a partition is transactional while this
leader knows no ongoing transaction of that producer at that epoch there (the transaction's first
batch on the partition) is checked with the transaction coordinator first — one `TxnVerifier`
call per producer for all such partitions of the request. A partition not in the transaction is
refused (INVALID_TXN_STATE before v11, TRANSACTION_ABORTABLE from v11) and nothing is written; a
coordinator that cannot answer yields the retriable NOT_ENOUGH_REPLICAS, as Kafka's
ReplicaManager maps it. The partition remembers the lowest sequence sent to verification
(`brokers/log/producer_state/verification.py`): a later batch of the transaction that reaches
it before the retried first one is refused out of order, not written ahead of it; a final
refusal forgets it. From v12 (KIP-890 part 2, `transaction.version` 2) the producer sends no
AddPartitionsToTxn: the same call asks the coordinator to add the partitions to the transaction
(Kafka's addPartition operation) instead of only verifying them. Only the first batch header is
peeked; requests without a transactional id take the unchanged path.

Before any of that, the request-wide rules of `produce_txn_rules.py`: transactional batches
need the request's transactional id and may name only one producer, else every partition is
refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_PRODUCER_ID_MAPPING), as Kafka.

Topic ids (KIP-516): v13 names each topic by id, and the answer carries the id; an id no topic
has answers every partition of it UNKNOWN_TOPIC_ID, as Kafka.

Leader epochs: when several partitions of a request start a new leader epoch (the first
appends to a new topic's partitions), their epoch checkpoints are written in one batch before
any append (`brokers.log.log.assign_epochs_together`) rather than each by its own append, two
fsyncs after another per partition. Runs on the event loop.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from typing_extensions import Buffer

from brokers.common.clock import Clock
from brokers.handlers.build import response_module
from brokers.handlers.errors import error_code_for, error_message_for
from brokers.handlers.produce_txn_rules import request_refusal
from brokers.handlers.services import AppendWaiter, MetadataView, Replicas, TxnVerifier
from brokers.handlers.topic_ids import TopicIds
from brokers.handlers.topic_metrics import BrokerTopicMetrics
from brokers.log.log import Log, assign_epochs_together
from brokers.log.producer_state.entry import ProducerStateEntry
from brokers.records.batch import HEADER_SIZE, BatchHeader, parse_header
from brokers.records.errors import RecordError
from brokers.records.prepare import NeedsWorker, PreparedAppend, prepare_append
from brokers.records.validate import AppendPolicy
from brokers.replication.isr import AckOutcome
from brokers.replication.partition import Partition
from brokers.server.context import RequestContext
from brokers.server.dispatcher import CloseConnection
from brokers.server.produce_response import (
    PartitionAnswer,
    TopicAnswer,
    encode_answers,
    kio_response,
)
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode
from brokers.wire.produce_request import ProduceRequestView, ProduceTopic, parse_produce_request

API_KEY = 0
FIRST_SERVED_VERSION = 3
VALID_ACKS = (-1, 0, 1)
PREPARE_WORKERS = 2
FIRST_ABORTABLE_VERSION = 11  # Kafka answers TRANSACTION_ABORTABLE to produce v11+ (KIP-890)
IMPLICIT_ADD_SINCE = 12  # KIP-890 part 2: the leader adds the partition to the transaction
TOPIC_ID_VERSION = MAX_VERSION = 13  # KIP-516: topics named by id
NOT_ADDED = "Partition was not added to the transaction"
STATE_MOVED = "The producer's state changed while the transaction was verified; retry"
# Coordinator answers that only mean "ask again": older clients retry NOT_ENOUGH_REPLICAS
# without a metadata refresh (Kafka's ReplicaManager picks it for the same reason).
_RETRY_VERIFICATION = frozenset(
    {
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.concurrent_transactions,
    }
)
Refusals = dict[tuple[str, int], tuple[ErrorCode, str | None]]
_workers: ThreadPoolExecutor | None = None


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    replicas: Replicas
    purgatory: AppendWaiter
    clock: Clock
    topic_metrics: BrokerTopicMetrics
    verifier: TxnVerifier | None = None
    topic_ids: TopicIds | None = None


def route(
    replicas: Replicas,
    purgatory: AppendWaiter,
    clock: Clock,
    topic_metrics: BrokerTopicMetrics,
    verifier: TxnVerifier | None = None,
    metadata: MetadataView | None = None,
) -> Route:
    broker = _Services(replicas, purgatory, clock, topic_metrics, verifier, TopicIds(metadata))

    async def handle(ctx: RequestContext, request: ProduceRequestView) -> Any:
        acks = request.acks
        failed = False
        answers: list[TopicAnswer] = []
        waiting: list[_Waiting] = []
        refused: Refusals = {}
        named = _named(broker, request, ctx.api_version)
        verifying = request.transactional_id is not None and acks in VALID_ACKS
        refusal = request_refusal(request.transactional_id, named)
        if refusal is not None:
            refused = {(n, d.index): refusal for n, t in named if n for d in t.partitions}
        elif verifying and broker.verifier is not None:
            refused = await _verify(broker, broker.verifier, request, named, ctx.api_version)
        if acks in VALID_ACKS:
            _assign_epochs(broker, named)
        for name, topic in named:
            partitions: list[PartitionAnswer] = []
            counted = [0, 0]  # the topic's bytes and records appended, counted once per request
            for data in topic.partitions:
                if name is None:
                    response, appended = PartitionAnswer(data.index, _UNKNOWN_ID), None
                elif refused and (name, data.index) in refused:
                    response, appended = _refused(broker, name, data.index, refused), None
                else:
                    response, appended = await _append(
                        broker, name, data.index, data.records, acks, counted
                    )
                failed = failed or response.error_code != ErrorCode.none
                if appended is not None and acks == -1:
                    waiting.append(_Waiting(partitions, len(partitions), *appended))
                partitions.append(response)
            if counted[1]:
                broker.topic_metrics.appended(name or "", counted[0], counted[1])
            answers.append(TopicAnswer(name or "", topic.topic_id or None, partitions))
        if acks == 0:
            if failed:
                raise CloseConnection("acks=0 produce failed")
            return None
        pending = _settle(broker, waiting) if waiting else waiting
        if pending:  # a standalone partition's acks=all append is decided at once: no await
            await _await_replication(broker, pending, request.timeout_ms / 1000)
        encoded = encode_answers(ctx.api_version, answers)
        if encoded is not None:
            return encoded
        return kio_response(response_module(API_KEY, ctx.api_version), answers)

    return Route(
        API_KEY,
        0,
        MAX_VERSION,
        handle,
        refused_below=FIRST_SERVED_VERSION,
        legacy=refuse_legacy,
        name="Produce",
        decode=_decode,
    )


_UNKNOWN_ID = ErrorCode.unknown_topic_id


def _refused(broker: _Services, name: str, index: int, refused: Refusals) -> PartitionAnswer:
    code, message = refused[(name, index)]
    if broker.replicas.find(name, index) is not None:  # a name no partition has: no series
        broker.topic_metrics.failed_produce.labels(name).inc()
    return PartitionAnswer(index, code, error_message=message)


def _decode(version: int, body: memoryview) -> ProduceRequestView:
    """The request as a view: each record set stays a view of the request's own buffer (kio's
    reader would copy every one into a new bytes object)."""
    return parse_produce_request(body, version)


def _topic_id(topic: ProduceTopic) -> uuid.UUID | None:
    return uuid.UUID(bytes=topic.topic_id) if topic.topic_id else None


def _named(
    broker: _Services, request: ProduceRequestView, version: int
) -> list[tuple[str | None, ProduceTopic]]:
    """Each topic of the request with its name (v13: the name its id resolves to, or None)."""
    if version < TOPIC_ID_VERSION:
        return [(topic.name, topic) for topic in request.topics]
    assert broker.topic_ids is not None
    return [(broker.topic_ids.name(_topic_id(topic)), topic) for topic in request.topics]


def _assign_epochs(broker: _Services, named: list[tuple[str | None, ProduceTopic]]) -> None:
    """The new leader epochs of the request's partitions, their checkpoints written together
    before any append (`brokers.log.log.assign_epochs_together`); one alone is left to its
    append, which writes it the same way."""
    if len(named) < 2 and (not named or len(named[0][1].partitions) < 2):
        return  # one partition: the usual request (no generator for it)
    logs: list[tuple[Log, int]] = []
    for name, topic in named:
        for data in topic.partitions:
            partition = None if name is None else broker.replicas.find(name, data.index)
            if partition is not None and partition.is_leader:
                logs.append((partition.log, partition.leader_epoch))
    if len(logs) > 1:
        assign_epochs_together(logs)


async def _append(
    broker: _Services,
    topic: str,
    index: int,
    records: memoryview | None,
    acks: int,
    counted: list[int],
) -> tuple[PartitionAnswer, tuple[Partition, int] | None]:
    """The partition's answer, and (partition, required offset) when the append happened;
    what it appended is added to `counted` (bytes, records)."""
    metrics = broker.topic_metrics
    try:
        if acks not in VALID_ACKS:
            return PartitionAnswer(index, ErrorCode.invalid_required_acks), None
        partition = broker.replicas.get(topic, index)
        policy = partition.append_policy(acks)
        try:  # inline when cheap (no hop to the loop and back), else on a worker thread
            prepared = prepare_append(records or b"", policy, inline=True)
        except NeedsWorker:
            prepared = await _prepare_on_worker(records or b"", policy)
        result = partition.append_prepared(prepared, acks)
    except Exception as exc:
        if broker.replicas.find(topic, index) is not None:  # a name no partition has: no series
            metrics.failed_produce.labels(topic).inc()
        error = PartitionAnswer(
            index,
            error_code_for(exc),
            error_message=error_message_for(exc),
            record_errors=_record_errors(exc),
        )
        return error, None
    if not result.duplicate:
        counted[0] += len(records or b"")
        counted[1] += result.last_offset - result.first_offset + 1
    answer = PartitionAnswer(
        index,
        ErrorCode.none,
        result.first_offset,
        result.log_append_time_ms,
        result.log_start_offset,
    )
    return answer, (partition, result.last_offset + 1)


async def _verify(
    broker: _Services,
    verifier: TxnVerifier,
    request: ProduceRequestView,
    named: list[tuple[str | None, ProduceTopic]],
    version: int,
) -> Refusals:
    """Ask the coordinator about every partition whose first batch starts a transaction here;
    the refusals to answer instead of appending. A partition whose producer state moved while
    the coordinator was asked (a marker written meanwhile: Kafka's verification guard) is
    refused with the retriable NOT_ENOUGH_REPLICAS, so the retry is verified afresh."""
    asks: dict[tuple[int, int], list[tuple[str, int]]] = {}
    before: dict[tuple[str, int], _Fingerprint] = {}
    for name, topic in named:
        for data in topic.partitions:
            header = first_header(data.records)
            if name is None or header is None or not header.is_transactional:
                continue
            partition = broker.replicas.find(name, data.index)
            if partition is None or not partition.is_leader:
                continue  # the append answers with the partition's own error
            producers = partition.log.producer_state
            entry = producers.last_entry(header.producer_id)
            if needs_verification(header, entry):
                key = (header.producer_id, header.producer_epoch)
                asks.setdefault(key, []).append((name, data.index))
                before[(name, data.index)] = _fingerprint(entry)
                producers.start_verification(
                    header.producer_id, header.base_sequence, header.producer_epoch,
                    supports_epoch_bump=version >= IMPLICIT_ADD_SINCE,
                )  # fmt: skip
    refused: Refusals = {}
    transactional_id = request.transactional_id
    assert transactional_id is not None  # only a transactional request is verified
    for (producer_id, producer_epoch), partitions in asks.items():
        answers = await verifier.verify(
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            add=version >= IMPLICIT_ADD_SINCE,
        )
        for tp in partitions:
            answer = answers.get(tp, ErrorCode.unknown_server_error)
            code, message = produce_error(answer, version)
            if code == ErrorCode.none and _moved(broker, tp, producer_id, before[tp]):
                code, message = ErrorCode.not_enough_replicas, STATE_MOVED
            if code != ErrorCode.none:
                refused[tp] = (code, message)
            if code not in (ErrorCode.none, ErrorCode.not_enough_replicas):
                _end_verification(broker, tp, producer_id)  # final: no retry will follow
    return refused


def _end_verification(broker: _Services, tp: tuple[str, int], producer_id: int) -> None:
    partition = broker.replicas.find(*tp)
    if partition is not None:
        partition.log.producer_state.end_verification(producer_id)


_Fingerprint = tuple[int, int, int, int | None, int] | None


def _fingerprint(entry: ProducerStateEntry | None) -> _Fingerprint:
    """What any append or marker of the producer changes in its state."""
    if entry is None:
        return None
    return (
        entry.producer_epoch,
        entry.coordinator_epoch,
        entry.last_timestamp,
        entry.current_txn_first_offset,
        entry.last_data_offset,
    )


def _moved(broker: _Services, tp: tuple[str, int], producer_id: int, seen: _Fingerprint) -> bool:
    partition = broker.replicas.find(*tp)
    if partition is None:
        return False  # the append answers for the partition
    return _fingerprint(partition.log.producer_state.last_entry(producer_id)) != seen


def first_header(records: bytes | memoryview | None) -> BatchHeader | None:
    """The first batch's header, or None when there is none to read (the append reports it)."""
    if records is None or len(records) < HEADER_SIZE:
        return None
    try:
        return parse_header(records)
    except RecordError:
        return None


def needs_verification(header: BatchHeader, entry: ProducerStateEntry | None) -> bool:
    """A transactional data batch of a producer with no ongoing transaction at its epoch on
    the partition: the first batch of a transaction there (Kafka's hasOngoingTransaction)."""
    if not header.is_transactional or header.is_control or not header.has_producer_id:
        return False
    return (
        entry is None
        or entry.producer_epoch != header.producer_epoch
        or entry.current_txn_first_offset is None
    )


def produce_error(code: ErrorCode, version: int) -> tuple[ErrorCode, str | None]:
    """A coordinator's verification answer as the produce answer of `version` (Kafka's
    AddPartitionsToTxnManager and ReplicaManager mapping)."""
    if code == ErrorCode.none:
        return code, None
    if code in _RETRY_VERIFICATION:
        return ErrorCode.not_enough_replicas, (
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {code.name.upper()}"
        )
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch, None
    if code == ErrorCode.transaction_abortable and version < FIRST_ABORTABLE_VERSION:
        code = ErrorCode.invalid_txn_state
    if code in (ErrorCode.invalid_txn_state, ErrorCode.transaction_abortable):
        return code, NOT_ADDED
    return code, None


async def _prepare_on_worker(data: Buffer, policy: AppendPolicy) -> PreparedAppend:
    """Validate a batch too heavy for the loop on a worker thread (see the module docstring)."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_worker_pool(), prepare_append, data, policy)


def _worker_pool() -> ThreadPoolExecutor:
    """One pool per process, shared by the brokers in it: the bound is on the machine's work."""
    global _workers
    if _workers is None:
        _workers = ThreadPoolExecutor(PREPARE_WORKERS, thread_name_prefix="pier-produce-prepare")
    return _workers


def _record_errors(exc: Exception) -> tuple[tuple[int, str | None], ...]:
    """The record a refusal names (v8+ answers it in `record_errors`), as (index, message)."""
    index = exc.record_index if isinstance(exc, RecordError) else None
    return () if index is None else ((index, str(exc)),)


@dataclass(slots=True)
class _Waiting:
    """An acks=all partition answer parked until replication decides it."""

    answers: list[PartitionAnswer]  # the topic's partition answers; `slot` replaced on failure
    slot: int
    partition: Partition
    required_offset: int

    def outcome(self, broker: _Services) -> ErrorCode | None:
        """None while pending; else the final error code (none: acknowledged)."""
        p = self.partition
        if not p.is_leader or broker.replicas.find(p.topic, p.index) is not p:
            return ErrorCode.not_leader_or_follower
        decided = p.acks_all_outcome(self.required_offset)
        if decided is AckOutcome.PENDING:
            return None
        if decided is AckOutcome.DONE:
            return ErrorCode.none
        return ErrorCode.not_enough_replicas_after_append


def _settle(broker: _Services, waiting: list[_Waiting]) -> list[_Waiting]:
    """Answer the entries replication has decided (a failure replaces its answer); the rest."""
    pending = []
    for entry in waiting:
        code = entry.outcome(broker)
        if code is None:
            pending.append(entry)
        elif code != ErrorCode.none:
            _fail(broker, entry, code)
    return pending


async def _await_replication(broker: _Services, pending: list[_Waiting], timeout_s: float) -> None:
    """Park until every pending entry is decided or `timeout_s` passes (REQUEST_TIMED_OUT)."""
    deadline = broker.clock.monotonic() + timeout_s
    while pending:
        remaining = deadline - broker.clock.monotonic()
        if remaining <= 0:
            break
        keys = [(e.partition.topic, e.partition.index) for e in pending]
        await broker.purgatory.wait(keys, remaining)
        pending = _settle(broker, pending)
    for entry in pending:
        _fail(broker, entry, ErrorCode.request_timed_out)


def _fail(broker: _Services, entry: _Waiting, code: ErrorCode) -> None:
    broker.topic_metrics.failed_produce.labels(entry.partition.topic).inc()
    entry.answers[entry.slot] = PartitionAnswer(entry.partition.index, code)


# ---- versions 0–2: parse just enough to name every partition, then refuse -----------------
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def refuse_legacy(ctx: RequestContext, frame: memoryview, offset: int) -> bytes | None:
    """Body of a v0–2 response with UNSUPPORTED_VERSION for each partition of the request."""
    pos = offset
    (acks,) = _I16.unpack_from(frame, pos)
    pos += 6  # acks int16, timeout int32
    (topic_count,) = _I32.unpack_from(frame, pos)
    pos += 4
    out = bytearray(_I32.pack(max(topic_count, 0)))
    for _ in range(max(topic_count, 0)):
        (name_length,) = _I16.unpack_from(frame, pos)
        name = bytes(frame[pos : pos + 2 + max(name_length, 0)])
        pos += 2 + max(name_length, 0)
        (partition_count,) = _I32.unpack_from(frame, pos)
        pos += 4
        out += name + _I32.pack(max(partition_count, 0))
        for _ in range(max(partition_count, 0)):
            (index,) = _I32.unpack_from(frame, pos)
            (size,) = _I32.unpack_from(frame, pos + 4)
            pos += 8 + max(size, 0)
            out += struct.pack(">ihq", index, ErrorCode.unsupported_version, -1)
            if ctx.api_version >= 2:
                out += struct.pack(">q", -1)  # log_append_time
    if ctx.api_version >= 1:
        out += _I32.pack(0)  # throttle_time_ms
    return None if acks == 0 else bytes(out)
