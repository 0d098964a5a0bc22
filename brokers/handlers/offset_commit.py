"""OffsetCommit (key 8, v2–9): store a group's consumed positions in `__consumer_offsets`.

Partitions of topics this broker does not know answer UNKNOWN_TOPIC_OR_PARTITION without reaching
the coordinator, as Kafka's request handler does; the rest are written in one batch before the
response. v2–4 may carry a retention time (an explicit expire timestamp); v6+ a leader epoch;
v7+ a group instance id. v10 names topics by id, which this broker does not serve yet.
Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.coordinator.offset_store import RETENTION_DEFAULT, CommitRequest, OffsetCommit
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.group_conversions import millis
from brokers.handlers.services import GroupService, MetadataView
from brokers.replication.errors import UnknownTopicOrPartitionError
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 8

Outcome = dict[tuple[str, int], Exception | None]


def route(groups: GroupService, metadata: MetadataView) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        outcome: Outcome = {}
        known: list[OffsetCommit] = []
        for topic in request.topics:
            for p in topic.partitions:
                if metadata.partition(topic.name, p.partition_index) is None:
                    outcome[(topic.name, p.partition_index)] = UnknownTopicOrPartitionError()
                    continue
                known.append(
                    OffsetCommit(
                        topic.name,
                        p.partition_index,
                        p.committed_offset,
                        getattr(p, "committed_leader_epoch", -1),
                        p.committed_metadata,
                    )
                )
        retention = getattr(request, "retention_time", None)
        commit = CommitRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            generation_id=request.generation_id_or_member_epoch,
            offsets=known,
            retention_ms=RETENTION_DEFAULT if retention is None else millis(retention),
        )
        if known:
            coordinator = groups.coordinator
            results = await coordinator.commit_offsets(commit, api_version=ctx.api_version)
            outcome.update({(c.topic, c.partition): error for c, error in results})
        return make(
            module,
            "OffsetCommitResponse",
            throttle_time=throttle(),
            topics=tuple(_topic(module, t, outcome) for t in request.topics),
        )

    return Route(API_KEY, 2, 9, handle, name="OffsetCommit")


def _topic(module: Any, topic: Any, outcome: Outcome) -> Any:
    """The classes themselves, not `make`: both have these fields in every version served."""
    name = topic.name
    partition = module.OffsetCommitResponsePartition
    partitions = tuple(
        partition(
            partition_index=p.partition_index,
            error_code=_code(outcome.get((name, p.partition_index))),
        )
        for p in topic.partitions
    )
    return module.OffsetCommitResponseTopic(name=name, partitions=partitions)


def _code(error: Exception | None) -> ErrorCode:
    return ErrorCode.none if error is None else error_code_for(error)
