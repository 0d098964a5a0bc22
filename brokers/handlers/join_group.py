"""JoinGroup (key 11, v0–9): join a classic group and wait for the rebalance to form.

The request parks until the coordinator completes the member's future (the join phase ends, a
timeout fires, or an error is known). v0 has no rebalance timeout (the session timeout serves);
v4+ requires a known member id (KIP-394); v5+ carries group instance ids (KIP-345); v9 lets a
restarted static leader skip the assignment. A JoinGroup for a non-empty KIP-848 consumer group
is served by `consumer_group_migration.join` (a classic member of a mixed group: answered at once,
no leader, generation = its member epoch) and written like a consumer heartbeat; one for an empty
consumer group replaces it with a classic group, as Kafka. Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.coordinator import consumer_group_migration as mixed
from brokers.coordinator.consumer_group import HeartbeatResult
from brokers.coordinator.consumer_group_regex import SortedTopicNames
from brokers.coordinator.joining import JoinRequest
from brokers.coordinator.results import JoinResult
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.group_conversions import client_host, millis
from brokers.handlers.services import GroupService, MetadataView
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 11
FIRST_NULLABLE_PROTOCOL = 7  # protocol_type/protocol_name became nullable


def route(groups: GroupService, metadata: MetadataView) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        module = response_module(API_KEY, version)
        session_ms = millis(request.session_timeout)
        rebalance = getattr(request, "rebalance_timeout", None)
        join = JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in request.protocols),
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=session_ms if rebalance is None else millis(rebalance),
            client_id=ctx.client_id,
            client_host=client_host(ctx),
            require_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
            reason=getattr(request, "reason", None),
        )
        result = await _mixed(groups, metadata, join) or await groups.coordinator.join_group(join)
        blank = "" if version < FIRST_NULLABLE_PROTOCOL else None
        members = tuple(
            make(
                module,
                "JoinGroupResponseMember",
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata,
            )
            for m in result.members
        )
        return make(
            module,
            "JoinGroupResponse",
            throttle_time=throttle(),
            error_code=ErrorCode.none if result.error is None else error_code_for(result.error),
            generation_id=result.generation_id,
            protocol_type=result.protocol_type if result.protocol_type is not None else blank,
            protocol_name=result.protocol_name if result.protocol_name is not None else blank,
            leader=result.leader_id,
            skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=members,
        )

    return Route(API_KEY, 0, 9, handle, name="JoinGroup")


async def _mixed(
    groups: GroupService, metadata: MetadataView, join: JoinRequest
) -> JoinResult | None:
    """The answer when the group id is a KIP-848 consumer group's, else None (classic)."""
    coordinator = groups.coordinator
    consumer_groups = coordinator.consumer_groups
    if join.group_id not in consumer_groups.groups or coordinator.check(join.group_id):
        return None
    if mixed.serves(consumer_groups, join.group_id) is None:
        # an empty consumer group gives way to the classic one (offsets kept)
        await coordinator.consumer_store.delete(join.group_id)
        return None
    group = await mixed.route(coordinator, join.group_id)  # None: downgraded just now
    if group is None:
        return None
    low, high = coordinator.config.min_session_timeout_ms, coordinator.config.max_session_timeout_ms
    if not low <= join.session_timeout_ms <= high:
        return None  # the classic path answers INVALID_SESSION_TIMEOUT
    request = mixed.ClassicJoin(
        group_id=join.group_id, member_id=join.member_id, instance_id=join.group_instance_id,
        protocol_type=join.protocol_type, protocols=join.protocols,
        session_timeout_ms=join.session_timeout_ms, rebalance_timeout_ms=join.rebalance_timeout_ms,
        client_id=join.client_id or "", client_host=join.client_host,
        require_known_member_id=join.require_known_member_id,
    )  # fmt: skip
    result = mixed.join(
        consumer_groups,
        group,
        request,
        lambda t: _count(metadata, t),
        lambda: SortedTopicNames(metadata.sorted_topic_names()),
    )
    if result.error is None:
        written = await coordinator.consumer_store.persist(
            HeartbeatResult(None, result.member_id, result.generation_id, 0),
            join.group_id,
            lambda t: None if (topic := metadata.topic(t)) is None else topic.topic_id,
        )
        if written.error is not None:
            return JoinResult.failed(result.member_id, written.error)
    return result


def _count(metadata: MetadataView, name: str) -> int | None:
    topic = metadata.topic(name)
    return None if topic is None else len(topic.partitions)
