"""TxnOffsetCommit (key 28, v0–4): a transactional producer's consumed offsets (KIP-98, KIP-447).

The offsets are written to the group's `__consumer_offsets` partition as one transactional batch
of the producer and stay pending until the transaction's marker commits or aborts them (see
`GroupCoordinator.txn_offset_commit`). Partitions of topics this broker does not know answer
UNKNOWN_TOPIC_OR_PARTITION without reaching the coordinator, as OffsetCommit. v2+ carry a leader
epoch; v3+ (KIP-447) the member id, generation and group instance id, checked when given. A
fenced producer epoch is INVALID_PRODUCER_EPOCH on every partition, as Kafka passes the log's
error through for every version. v5 (KIP-890 part 2) is not served. Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.coordinator.group_records import NO_LEADER_EPOCH, OffsetAndMetadata
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import GroupService, MetadataView
from brokers.replication.errors import UnknownTopicOrPartitionError
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 28
NO_GENERATION = -1
NO_TIMESTAMP = -1  # the coordinator stamps the commit time

Outcome = dict[tuple[str, int], Exception | None]


def route(groups: GroupService, metadata: MetadataView) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
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

    return Route(API_KEY, 0, 4, handle, name="TxnOffsetCommit")


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
