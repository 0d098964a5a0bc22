"""OffsetForLeaderEpoch (key 23, v2–4): the end offset of a leader epoch (KIP-101, KIP-279).

Followers and KIP-320 consumers use it to detect divergence after a leader change. Answered from
the partition's leader-epoch cache. Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import Replicas
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 23


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    replicas: Replicas


def route(replicas: Replicas) -> Route:
    broker = _Services(replicas)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        topics = tuple(
            make(
                module,
                "OffsetForLeaderTopicResult",
                topic=topic.topic,
                partitions=tuple(
                    _end_offset(module, broker, topic.topic, p) for p in topic.partitions
                ),
            )
            for topic in request.topics
        )
        return make(module, "OffsetForLeaderEpochResponse", throttle_time=throttle(), topics=topics)

    return Route(API_KEY, 2, 4, handle, name="OffsetForLeaderEpoch")


def _end_offset(module: ModuleType, broker: _Services, topic: str, wanted: Any) -> Any:
    try:
        partition = broker.replicas.get(topic, wanted.partition)
        partition.check_epoch(getattr(wanted, "current_leader_epoch", -1))
        log = partition.log
        epoch, end_offset = log.leader_epoch_cache.end_offset_for(
            wanted.leader_epoch, log.log_end_offset
        )
    except Exception as exc:
        return make(
            module, "EpochEndOffset", error_code=error_code_for(exc), partition=wanted.partition
        )
    return make(
        module,
        "EpochEndOffset",
        error_code=ErrorCode.none,
        partition=wanted.partition,
        leader_epoch=epoch,
        end_offset=end_offset,
    )
