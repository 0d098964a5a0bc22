"""OffsetFetch (key 9, v1–9): a group's committed offsets; all of them when topics is null (v2+).

v1–7 ask for one group; v8+ for several (`groups`). A partition without a committed offset
answers offset -1 and empty metadata. Group-level errors (not coordinator, loading) go in the
top-level/group error field from v2; in v1, which has none, every requested partition carries it.
`require_stable` (v7+, KIP-447) answers UNSTABLE_OFFSET_COMMIT (offset -1) for each partition with
a commit still being written or transactional offsets awaiting their marker (KIP-98); in v7 per
partition, in v8+ per partition of each group; without it the last committed offset is answered.
v9's member id/epoch belong to KIP-848 groups and are ignored for classic groups; v10 names topics
by id and is not served yet. Runs on the event loop.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brokers.coordinator.offset_store import FetchedOffset
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import GroupService
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

if TYPE_CHECKING:
    from types import ModuleType


API_KEY = 9
FIRST_MULTI_GROUP_VERSION = 8
FIRST_TOP_LEVEL_ERROR_VERSION = 2


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    groups: GroupService


def route(groups: GroupService) -> Route:
    broker = _Services(groups)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        module = response_module(API_KEY, version)
        stable = bool(getattr(request, "require_stable", False))
        if version >= FIRST_MULTI_GROUP_VERSION:
            groups = tuple(
                _group(module, broker, g.group_id, g.topics, stable, _member_check(broker, g))
                for g in request.groups
            )
            return make(module, "OffsetFetchResponse", throttle_time=throttle(), groups=groups)
        error, topics = _fetch(module, broker, request.group_id, request.topics, stable, version)
        return make(
            module,
            "OffsetFetchResponse",
            throttle_time=throttle(),
            topics=topics,
            error_code=error,
        )

    return Route(API_KEY, 1, 9, handle, name="OffsetFetch")


def _member_check(broker: _Services, group: Any) -> ErrorCode:
    """v9 (KIP-848): a consumer group's member id and epoch, STALE_MEMBER_EPOCH as Kafka."""
    member_id = getattr(group, "member_id", None)
    epoch = getattr(group, "member_epoch", -1)
    error = broker.groups.coordinator.consumer_groups.validate_fetch(
        group.group_id, member_id, epoch
    )
    return ErrorCode.none if error is None else error_code_for(error)


def _group(
    module: ModuleType,
    broker: _Services,
    group_id: str,
    wanted: Any,
    stable: bool,
    member_error: ErrorCode = ErrorCode.none,
) -> Any:
    if member_error is not ErrorCode.none:
        return make(
            module,
            "OffsetFetchResponseGroup",
            group_id=group_id,
            topics=(),
            error_code=member_error,
        )
    error, topics = _fetch(module, broker, group_id, wanted, stable, FIRST_MULTI_GROUP_VERSION)
    return make(
        module, "OffsetFetchResponseGroup", group_id=group_id, topics=topics, error_code=error
    )


def _fetch(
    module: ModuleType, broker: _Services, group_id: str, wanted: Any, stable: bool, version: int
) -> tuple[ErrorCode, tuple[Any, ...]]:
    requested = None if wanted is None else [(t.name, t.partition_indexes) for t in wanted]
    coordinator = broker.groups.coordinator
    error, fetched = coordinator.fetch_offsets(group_id, requested, require_stable=stable)
    code = ErrorCode.none if error is None else error_code_for(error)
    if error is not None and version < FIRST_TOP_LEVEL_ERROR_VERSION and requested is not None:
        fetched = [FetchedOffset(t, p, None, error) for t, ps in requested for p in ps]
    return code, _topics(module, version, fetched)


def _topics(module: ModuleType, version: int, fetched: Sequence[FetchedOffset]) -> tuple[Any, ...]:
    multi = version >= FIRST_MULTI_GROUP_VERSION
    partition_class = "OffsetFetchResponsePartitions" if multi else "OffsetFetchResponsePartition"
    topic_class = "OffsetFetchResponseTopics" if multi else "OffsetFetchResponseTopic"
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for f in fetched:
        value = f.value
        by_topic[f.topic].append(
            make(
                module,
                partition_class,
                partition_index=f.partition,
                committed_offset=-1 if value is None else value.offset,
                committed_leader_epoch=-1 if value is None else value.leader_epoch,
                metadata="" if value is None else value.metadata,
                error_code=ErrorCode.none if f.error is None else error_code_for(f.error),
            )
        )
    return tuple(
        make(module, topic_class, name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
