"""StopReplica (key 5): the controller tells this broker to stop serving (and maybe delete) replicas.

Owns: fencing (stale controller or broker epoch → the top-level error, nothing stopped) and
handing the partitions, grouped by their delete flag, to `ReplicaManager.stop_replicas`; each
partition's outcome is answered. Used for topic deletion (delete) and for replicas going offline
or moving away (no delete). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from typing import Protocol

from brokers.controller import control_api as rq
from brokers.handlers.control_fence import FENCED, BrokerFence
from brokers.handlers.control_requests import control_route
from brokers.handlers.errors import error_code_for
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

Results = dict[tuple[str, int], Exception | None]


class StopReplicaTarget(Protocol):
    def stop_replicas(self, partitions: list[tuple[str, int]], *, delete: bool) -> Results: ...


def handle(
    request: rq.StopReplicaRequest, fence: BrokerFence, replicas: StopReplicaTarget
) -> rq.StopReplicaResponse:
    try:
        fence.admit(request.controller_epoch, request.broker_epoch)
    except FENCED as exc:
        return rq.StopReplicaResponse(error_code=error_code_for(exc))
    by_flag: dict[bool, list[tuple[str, int]]] = {True: [], False: []}
    for topic in request.topic_states:
        for p in topic.partition_states:
            by_flag[p.delete_partition].append((topic.topic_name, p.partition_index))
    results: Results = {}
    for delete, partitions in by_flag.items():
        if partitions:
            results.update(replicas.stop_replicas(partitions, delete=delete))
    errors = tuple(
        rq.StopReplicaPartitionError(
            topic_name=topic,
            partition_index=partition,
            error_code=ErrorCode.none if error is None else error_code_for(error),
        )
        for (topic, partition), error in sorted(results.items())
    )
    return rq.StopReplicaResponse(error_code=ErrorCode.none, partition_errors=errors)


def route(fence: BrokerFence, replicas: StopReplicaTarget) -> Route:
    return control_route(rq.STOP_REPLICA, lambda r: handle(r, fence, replicas))
