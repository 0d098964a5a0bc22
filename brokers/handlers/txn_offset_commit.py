"""TxnOffsetCommit (key 28, v0–5): a transactional producer's consumed offsets (KIP-98, KIP-447).

The offsets are written to the group's `__consumer_offsets` partition as one transactional batch
of the producer and stay pending until the transaction's marker commits or aborts them (see
`GroupCoordinator.txn_offset_commit`). Partitions of topics this broker does not know answer
UNKNOWN_TOPIC_OR_PARTITION without reaching the coordinator, as OffsetCommit. v2+ carry a leader
epoch; v3+ (KIP-447) the member id, generation and group instance id, checked when given. A
fenced producer epoch is INVALID_PRODUCER_EPOCH on every partition, as Kafka passes the log's
error through for every version. Transaction verification (KIP-890, unless
`transaction.partition.verification.enable` is false), as Kafka's GroupCoordinator for every
version: v0–4 first ask the transaction coordinator whether the group's `__consumer_offsets`
partition is in the producer's ongoing transaction (AddOffsetsToTxn put it there;
`TxnVerifier.verify`), since offsets written for a transaction no coordinator knows would never
get a marker: the group's require_stable fetch would answer UNSTABLE_OFFSET_COMMIT for good,
and the offsets partition's last stable offset would stay behind them, stopping its compaction
for every group there, whoever's they are. v5
(KIP-890 part 2, `transaction.version` 2): the producer sent no AddOffsetsToTxn, so the partition
is added instead (`add=True`, as a partition leader does for Produce v12). A refusal answers
every partition (retriable answers as COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS, a
fence as INVALID_PRODUCER_EPOCH, a partition not in the transaction INVALID_TXN_STATE).
Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.coordinator.group_records import NO_LEADER_EPOCH, OffsetAndMetadata
from brokers.coordinator.offsets_topic import OFFSETS_TOPIC
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import GroupService, MetadataView, TxnVerifier
from brokers.replication.errors import UnknownTopicOrPartitionError
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 28
NO_GENERATION = -1
NO_TIMESTAMP = -1  # the coordinator stamps the commit time
IMPLICIT_ADD_SINCE = 5  # KIP-890 part 2
ABORTABLE_SINCE = 4  # older versions get INVALID_TXN_STATE instead of TRANSACTION_ABORTABLE
_ADD_ANSWERS = {
    ErrorCode.network_exception: ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator: ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_not_available: ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress: ErrorCode.coordinator_load_in_progress,
    ErrorCode.concurrent_transactions: ErrorCode.coordinator_load_in_progress,
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
}

Outcome = dict[tuple[str, int], Exception | None]


def route(
    groups: GroupService, metadata: MetadataView, verifier: TxnVerifier | None = None
) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        if verifier is not None:
            refused = await _verify_offsets_partition(groups, verifier, request, ctx.api_version)
            if refused is not None:
                return _refuse_all(module, request, refused)
        outcome: Outcome = {}
        offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        for topic in request.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if metadata.partition(topic.name, p.partition_index) is None:
                    outcome[tp] = UnknownTopicOrPartitionError()
                    continue
                epoch = getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH)
                metadata_text = p.committed_metadata or ""
                offsets[tp] = OffsetAndMetadata(
                    p.committed_offset, epoch, metadata_text, NO_TIMESTAMP
                )
        if offsets:
            results = await groups.coordinator.txn_offset_commit(
                request.transactional_id,
                request.group_id,
                request.producer_id,
                request.producer_epoch,
                getattr(request, "member_id", ""),
                getattr(request, "generation_id", NO_GENERATION),
                getattr(request, "group_instance_id", None),
                offsets,
            )
            outcome.update(results)
        return make(
            module,
            "TxnOffsetCommitResponse",
            throttle_time=throttle(),
            topics=tuple(_topic(module, t, outcome) for t in request.topics),
        )

    max_version = 4 if verifier is None else IMPLICIT_ADD_SINCE
    return Route(API_KEY, 0, max_version, handle, name="TxnOffsetCommit")


async def _verify_offsets_partition(
    groups: GroupService, verifier: TxnVerifier, request: Any, version: int
) -> ErrorCode | None:
    """Verify (v5: add) the group's offsets partition in the producer's transaction; the code
    to refuse with, if any (Kafka's txnOffsetCommitRequestVersionToTransactionSupportedOperation:
    TRANSACTION_ABORTABLE from v4)."""
    offsets_partition = (OFFSETS_TOPIC, groups.coordinator.partition_for(request.group_id))
    answers = await verifier.verify(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        [offsets_partition],
        add=version >= IMPLICIT_ADD_SINCE,
    )
    code = answers.get(offsets_partition, ErrorCode.unknown_server_error)
    if code == ErrorCode.none:
        return None
    if code == ErrorCode.transaction_abortable and version < ABORTABLE_SINCE:
        return ErrorCode.invalid_txn_state
    return _ADD_ANSWERS.get(code, code)


def _refuse_all(module: Any, request: Any, code: ErrorCode) -> Any:
    outcome: dict[tuple[str, int], ErrorCode] = {
        (t.name, p.partition_index): code for t in request.topics for p in t.partitions
    }
    topics = tuple(
        make(
            module,
            "TxnOffsetCommitResponseTopic",
            name=t.name,
            partitions=tuple(
                make(
                    module,
                    "TxnOffsetCommitResponsePartition",
                    partition_index=p.partition_index,
                    error_code=outcome[(t.name, p.partition_index)],
                )
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return make(module, "TxnOffsetCommitResponse", throttle_time=throttle(), topics=topics)


def _topic(module: Any, topic: Any, outcome: Outcome) -> Any:
    partitions = tuple(
        make(
            module,
            "TxnOffsetCommitResponsePartition",
            partition_index=p.partition_index,
            error_code=_code(outcome.get((topic.name, p.partition_index))),
        )
        for p in topic.partitions
    )
    return make(module, "TxnOffsetCommitResponseTopic", name=topic.name, partitions=partitions)


def _code(error: Exception | None) -> ErrorCode:
    return ErrorCode.none if error is None else error_code_for(error)
