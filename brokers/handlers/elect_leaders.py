"""ElectLeaders (key 43, v0–2, KIP-183/KIP-460): preferred or unclean leader election.

Owns: answering on the active controller (ZooKeeper mode, where Kafka's admin client sends it).
v0 always elects the preferred replica; v1+ carries `election_type` (0 preferred, 1 unclean;
anything else is INVALID_REQUEST for every partition). Null topic partitions mean every
partition, and then the controller leaves out those that needed no election. Per-partition
outcomes are domain errors mapped by `handlers.errors` (ELECTION_NOT_NEEDED,
PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION). A
broker that is not the controller answers NOT_CONTROLLER: at the top level from v1, per
partition in v0 (which has no top-level code), so clients look for the controller again.
Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Protocol

from brokers.controller import ControllerError, TopicPartition
from brokers.handlers.build import by_topic, make, response_module, throttle
from brokers.handlers.errors import InvalidRequestError, error_code_for, error_message_for
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 43
PREFERRED, UNCLEAN = 0, 1
Outcomes = Mapping[TopicPartition, Exception | None]


class LeaderElector(Protocol):
    async def elect_leaders(
        self, partitions: Sequence[tuple[str, int]] | None, *, unclean: bool = False
    ) -> Outcomes: ...


def route(controller: LeaderElector) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        wanted = _requested(request)
        election_type = int(getattr(request, "election_type", PREFERRED))
        try:
            if election_type not in (PREFERRED, UNCLEAN):
                outcomes: Outcomes = _all(wanted, InvalidRequestError("unknown election type"))
            else:
                outcomes = await controller.elect_leaders(wanted, unclean=election_type == UNCLEAN)
        except ControllerError as exc:  # NOT_CONTROLLER or another code, never a closed connection
            if ctx.api_version >= 1:
                return _response(module, {}, error_code_for(exc))
            outcomes = _all(wanted, exc)
        return _response(module, outcomes, ErrorCode.none)

    return Route(API_KEY, 0, 2, handle, name="ElectLeaders")


def _requested(request: Any) -> list[tuple[str, int]] | None:
    if request.topic_partitions is None:
        return None
    seen = {(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions}
    return sorted(seen)


def _all(wanted: list[tuple[str, int]] | None, exc: Exception) -> Outcomes:
    return {TopicPartition(*tp): exc for tp in wanted or []}


def _response(module: ModuleType, outcomes: Outcomes, code: ErrorCode) -> Any:
    def result(partition: int, exc: Exception | None) -> Any:
        return make(
            module,
            "PartitionResult",
            partition_id=partition,
            error_code=ErrorCode.none if exc is None else error_code_for(exc),
            error_message=None if exc is None else error_message_for(exc),
        )

    results = tuple(
        make(module, "ReplicaElectionResult", topic=topic, partition_result=parts)
        for topic, parts in by_topic(outcomes.items(), result)
    )
    return make(
        module,
        "ElectLeadersResponse",
        throttle_time=throttle(),
        error_code=code,
        replica_election_results=results,
    )
