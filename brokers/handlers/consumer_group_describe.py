"""ConsumerGroupDescribe (key 69, v0–1): KIP-848 consumer groups as `kafka-consumer-groups
--describe` and Admin.describeConsumerGroups read them.

Per group: the coordinator's check (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
INVALID_GROUP_ID), GROUP_ID_NOT_FOUND for a group that is not a consumer group (Kafka's admin
then falls back to DescribeGroups for classic groups), else the group and epochs, and per member
its subscription, current assignment and target assignment (v1: member type 1, consumer, or 0
for a classic member of a mixed group).
Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.coordinator.consumer_group import ConsumerGroup, ConsumerMember, Partitions
from brokers.coordinator.group import GroupState
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.describe_groups import AUTHORIZED_OPERATIONS_OMITTED, GROUP_OPERATIONS
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import GroupService, MetadataView
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 69
CLASSIC_MEMBER_TYPE = 0  # a classic-protocol member of a mixed group (consumer_group_migration)
CONSUMER_MEMBER_TYPE = 1
MAX_GROUPS = 10_000


def route(groups: GroupService, metadata: MetadataView) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        wants_ops = bool(request.include_authorized_operations)
        ops = GROUP_OPERATIONS if wants_ops else AUTHORIZED_OPERATIONS_OMITTED
        described = tuple(
            _describe(module, groups, metadata, group_id, ops)
            for group_id in request.group_ids[:MAX_GROUPS]
        )
        return make(module, "ConsumerGroupDescribeResponse", throttle_time=throttle(),
                    groups=described)  # fmt: skip

    return Route(API_KEY, 0, 1, handle, name="ConsumerGroupDescribe")


def _describe(
    module: Any, groups: GroupService, metadata: MetadataView, group_id: str, ops: int
) -> Any:
    coordinator = groups.coordinator
    error = coordinator.check(group_id)
    group = coordinator.consumer_groups.groups.get(group_id)
    if error is not None:
        return _failed(module, group_id, error_code_for(error), None)
    if group is None:
        return _failed(
            module, group_id, ErrorCode.group_id_not_found, _not_found(coordinator, group_id)
        )
    return make(
        module,
        "DescribedGroup",
        error_code=ErrorCode.none,
        group_id=group_id,
        group_state=group.state,
        group_epoch=group.epoch,
        assignment_epoch=group.target_epoch,
        assignor_name=group.assignor,
        members=tuple(_member(module, group, m, metadata) for m in group.members.values()),
        authorized_operations=ops,
    )


def _not_found(coordinator: Any, group_id: str) -> str:
    """Kafka's two messages: a live classic group is "not a consumer group", else "not found"."""
    classic = coordinator.groups.get(group_id)
    if classic is not None and classic.state != GroupState.DEAD:
        return f"Group {group_id} is not a consumer group."
    return f"Group {group_id} not found."


def _failed(module: Any, group_id: str, code: ErrorCode, message: str | None) -> Any:
    return make(
        module, "DescribedGroup", error_code=code, error_message=message, group_id=group_id,
        group_state="Dead", group_epoch=-1, assignment_epoch=-1, assignor_name="", members=(),
    )  # fmt: skip


def _member(
    module: Any, group: ConsumerGroup, member: ConsumerMember, metadata: MetadataView
) -> Any:
    return make(
        module,
        "Member",
        member_id=member.member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        member_epoch=member.epoch,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed)),
        subscribed_topic_regex=member.regex or None,
        assignment=_assignment(module, member.sent or {}, metadata),
        target_assignment=_assignment(module, group.target.get(member.member_id, {}), metadata),
        member_type=(
            CLASSIC_MEMBER_TYPE if member.member_id in group.classic else CONSUMER_MEMBER_TYPE
        ),
    )


def _assignment(module: Any, partitions: Partitions, metadata: MetadataView) -> Any:
    entries = []
    for name in sorted(partitions):
        topic = metadata.topic(name)
        if topic is None or not partitions[name]:
            continue
        entries.append(
            make(
                module,
                "TopicPartitions",
                topic_id=topic.topic_id,
                topic_name=name,
                partitions=tuple(sorted(partitions[name])),
            )
        )
    return make(module, "Assignment", topic_partitions=tuple(entries))
