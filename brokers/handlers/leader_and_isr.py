"""LeaderAndIsr (key 4): the controller makes this broker a partition's leader or follower.

Owns: fencing the request (`BrokerFence`: stale controller epoch or stale broker epoch → the
top-level error, nothing applied — Kafka's `KafkaApis.handleLeaderAndIsrRequest`), turning its
partition states into `PartitionStateUpdate`s for `ReplicaManager.apply_leader_and_isr`, and the
per-partition errors of the answer. Topic configs come from the metadata cache (ZooKeeper's
`/config/topics`, kept there by the topic admin). The leader-epoch checkpoints the request
changes are written together before the answer (`leader_epoch_cache.batched_writes`: one batch
of fsyncs rather than two per partition becoming leader); a partition whose checkpoint could not
be written is answered with that error. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from typing import Protocol

from brokers.controller import control_api as rq
from brokers.handlers.control_fence import FENCED, BrokerFence
from brokers.handlers.control_requests import control_route
from brokers.handlers.errors import error_code_for
from brokers.log.errors import LogDirError, StorageError
from brokers.log.leader_epoch_cache import batched_writes
from brokers.log.log import parse_topic_partition
from brokers.replication.metadata_cache import MetadataCache
from brokers.replication.replica_manager import PartitionStateUpdate
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

Results = dict[tuple[str, int], Exception | None]


class LeaderAndIsrTarget(Protocol):
    def apply_leader_and_isr(
        self,
        controller_epoch: int,
        updates: list[PartitionStateUpdate],
        leaders: dict[int, tuple[str, int]],
    ) -> Results: ...


def updates_of(
    request: rq.LeaderAndIsrRequest, metadata: MetadataCache
) -> list[PartitionStateUpdate]:
    updates: list[PartitionStateUpdate] = []
    for topic in request.topic_states:
        known = metadata.topic(topic.topic_name)
        configs = dict(known.configs) if known is not None else {}
        topic_id = topic.topic_id or (known.topic_id if known is not None else None)
        if topic_id is None:
            continue  # no id from the controller nor the cache: nothing to key the log by
        updates += [
            PartitionStateUpdate(
                topic=topic.topic_name,
                partition=p.partition_index,
                topic_id=topic_id,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                isr=list(p.isr),
                replicas=list(p.replicas),
                zk_version=p.partition_epoch,
                configs=configs,
            )
            for p in topic.partition_states
        ]
    return updates


def handle(
    request: rq.LeaderAndIsrRequest,
    fence: BrokerFence,
    metadata: MetadataCache,
    replicas: LeaderAndIsrTarget,
) -> rq.LeaderAndIsrResponse:
    try:
        fence.admit(request.controller_epoch, request.broker_epoch)
    except FENCED as exc:
        return rq.LeaderAndIsrResponse(error_code=error_code_for(exc))
    leaders = {leader.broker_id: (leader.host_name, leader.port) for leader in request.live_leaders}
    with batched_writes() as unwritten:
        results = replicas.apply_leader_and_isr(
            request.controller_epoch, updates_of(request, metadata), leaders
        )
    for path, error in unwritten.items():
        try:
            results[parse_topic_partition(path.parent)] = StorageError(f"{path}: {error}")
        except LogDirError:
            continue  # not a partition's directory: no partition of the answer to fail
    topics = tuple(
        rq.LeaderAndIsrTopicError(
            topic_id=topic.topic_id,
            partition_errors=tuple(
                rq.LeaderAndIsrPartitionError(
                    partition_index=p.partition_index,
                    error_code=_code(results, topic.topic_name, p.partition_index),
                )
                for p in topic.partition_states
            ),
        )
        for topic in request.topic_states
    )
    return rq.LeaderAndIsrResponse(error_code=ErrorCode.none, topics=topics)


def _code(results: Results, topic: str, partition: int) -> int:
    if (topic, partition) not in results:
        return int(ErrorCode.unknown_topic_or_partition)
    error = results[(topic, partition)]
    return int(ErrorCode.none) if error is None else int(error_code_for(error))


def route(fence: BrokerFence, metadata: MetadataCache, replicas: LeaderAndIsrTarget) -> Route:
    return control_route(rq.LEADER_AND_ISR, lambda r: handle(r, fence, metadata, replicas))
