"""ConsumerGroupHeartbeat (key 68, v0–1): KIP-848's one request for joining, heartbeating,
reconciling and leaving a consumer group.

Checks the request as Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid` does (a member id
on v1 and whenever the epoch is not 0, INVALID_REQUEST otherwise; v0 joins get a server-chosen
id), maps owned/assigned partitions between topic ids and names through the metadata view, and
leaves the state machine to `brokers.coordinator.consumer_group`. A SubscribedTopicRegex is
checked here (`consumer_group_regex.check_regex`: RE2 syntax, length, distinct regexes per group;
INVALID_REGULAR_EXPRESSION as Kafka) and resolved by the coordinator. A join for a group id held
by a classic group with members upgrades it (`consumer_group_migration.upgrade`, or
GROUP_ID_NOT_FOUND when it cannot be); any other heartbeat for it is GROUP_ID_NOT_FOUND. The
leave of the last consumer-protocol member of a mixed group downgrades it at once.
The group's changed records are written to `__consumer_offsets`
(`consumer_group_store.persist`) before the answer. Runs on the event loop.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from brokers.coordinator import consumer_group_migration as mixed
from brokers.coordinator.consumer_group import (
    LEAVE_EPOCH,
    HeartbeatRequest,
    HeartbeatResult,
    Partitions,
)
from brokers.coordinator.consumer_group_regex import SortedTopicNames, check_regex
from brokers.coordinator.errors import GroupError, GroupIdNotFoundError
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import InvalidRequestError, error_code_for
from brokers.handlers.group_conversions import client_host, millis
from brokers.handlers.services import GroupService, MetadataView
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 68
MAX_SUBSCRIBED_TOPICS = 10_000
MAX_ID_LENGTH = 255


def route(groups: GroupService, metadata: MetadataView) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        coordinator = groups.coordinator
        error: Exception | None = _invalid(request, ctx.api_version)
        error = error or coordinator.check(request.group_id)
        error = error or _classic(groups, request, metadata)
        error = error or _regex_error(groups, request)
        if error is not None:
            return _answer(
                module, error, request.member_id, request.member_epoch, 0, None, metadata
            )
        heartbeat = HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            subscribed_topics=request.subscribed_topic_names,
            server_assignor=request.server_assignor,
            owned=_owned(request.topic_partitions, metadata),
            client_id=ctx.client_id or "",
            client_host=client_host(ctx),
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            subscribed_regex=_regex(request),
            rebalance_timeout_ms=millis(request.rebalance_timeout),
        )
        result = coordinator.consumer_groups.heartbeat(
            heartbeat,
            lambda t: _count(metadata, t),
            lambda: SortedTopicNames(metadata.sorted_topic_names()),
        )
        result = await coordinator.consumer_store.persist(
            result, request.group_id, lambda t: _topic_id(metadata, t)
        )  # written to __consumer_offsets before the answer (consumer_group_store)
        if request.member_epoch == LEAVE_EPOCH and result.error is None:
            await mixed.route(coordinator, request.group_id)  # only classic members: downgrade
        return _result(module, result, metadata)

    return Route(API_KEY, 0, 1, handle, name="ConsumerGroupHeartbeat")


def _invalid(request: Any, version: int) -> Exception | None:
    epoch, member_id = request.member_epoch, request.member_id
    if len(member_id) > MAX_ID_LENGTH:
        return InvalidRequestError("MemberId is too long")
    if (version >= 1 or epoch != 0) and not member_id:
        return InvalidRequestError("MemberId can't be empty.")
    if epoch < -2:
        return InvalidRequestError(f"MemberEpoch {epoch} is invalid")
    topics = request.subscribed_topic_names
    if epoch == 0 and topics is None and _regex(request) is None:
        return InvalidRequestError(
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
        )
    if topics is not None and len(topics) > MAX_SUBSCRIBED_TOPICS:
        return InvalidRequestError(f"more than {MAX_SUBSCRIBED_TOPICS} subscribed topics")
    if epoch == 0 and millis(request.rebalance_timeout) < -1:
        return InvalidRequestError("RebalanceTimeoutMs is invalid")
    return None


class InvalidRegularExpressionError(Exception):
    """A SubscribedTopicRegex refused by `check_regex` (INVALID_REGULAR_EXPRESSION)."""


def _regex(request: Any) -> str | None:
    """The request's SubscribedTopicRegex: v1+ (v0, as Kafka 3.7-3.9's clients send it, has none)."""
    return getattr(request, "subscribed_topic_regex", None)


def _regex_error(groups: GroupService, request: Any) -> Exception | None:
    regex = _regex(request)
    if not regex or request.member_epoch < 0:  # librdkafka sends "" for none
        return None
    group = groups.coordinator.consumer_groups.groups.get(request.group_id)
    others = () if group is None else (
        m.regex for m in group.members.values() if m.regex and m.member_id != request.member_id
    )  # fmt: skip
    reason = check_regex(regex, others)
    return None if reason is None else InvalidRegularExpressionError(reason)


def _classic(groups: GroupService, request: Any, metadata: MetadataView) -> GroupError | None:
    """A join into a classic group with members upgrades it (consumer_group_migration)."""
    coordinator, group_id = groups.coordinator, request.group_id
    classic = coordinator.groups.get(group_id)
    if classic is None or not classic.members or group_id in coordinator.consumer_groups.groups:
        return None
    if request.member_epoch != 0:
        return GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")
    upgraded = mixed.upgrade(coordinator.consumer_groups, classic, lambda t: _count(metadata, t))
    if isinstance(upgraded, GroupError):
        return upgraded
    coordinator.rebalancer.store_in_background(classic, {})  # member-less: offsets only
    return None


def _owned(topic_partitions: Any, metadata: MetadataView) -> Partitions | None:
    if topic_partitions is None:
        return None
    owned: Partitions = {}
    for entry in topic_partitions:
        topic = metadata.topic_by_id(entry.topic_id) if entry.topic_id else None
        if topic is not None:
            owned.setdefault(topic.name, set()).update(int(p) for p in entry.partitions)
    return owned


def _topic_id(metadata: MetadataView, name: str) -> uuid.UUID | None:
    topic = metadata.topic(name)
    return None if topic is None else topic.topic_id


def _count(metadata: MetadataView, name: str) -> int | None:
    topic = metadata.topic(name)
    return None if topic is None else len(topic.partitions)


def _result(module: Any, result: HeartbeatResult, metadata: MetadataView) -> Any:
    return _answer(
        module, result.error, result.member_id, result.member_epoch,
        result.heartbeat_interval_ms, result.assignment, metadata,
    )  # fmt: skip


def _answer(
    module: Any,
    error: Exception | None,
    member_id: str,
    member_epoch: int,
    interval_ms: int,
    assignment: Partitions | None,
    metadata: MetadataView,
) -> Any:
    entity_assignment = None
    if assignment is not None and error is None:
        entity_assignment = make(
            module, "Assignment", topic_partitions=_topic_partitions(module, assignment, metadata)
        )
    return make(
        module,
        "ConsumerGroupHeartbeatResponse",
        throttle_time=throttle(),
        error_code=_code(error),
        error_message=None if error is None else (str(error) or None),
        member_id=member_id or None,
        member_epoch=member_epoch,
        heartbeat_interval=_ms(interval_ms),
        assignment=entity_assignment,
    )


def _code(error: Exception | None) -> ErrorCode:
    if error is None:
        return ErrorCode.none
    if isinstance(error, InvalidRegularExpressionError):
        return ErrorCode.invalid_regular_expression
    return error_code_for(error)


def _topic_partitions(
    module: Any, assignment: Partitions, metadata: MetadataView
) -> tuple[Any, ...]:
    entries = []
    for name in sorted(assignment):
        topic = metadata.topic(name)
        if topic is None:
            continue
        ids: uuid.UUID = topic.topic_id
        entries.append(
            make(
                module, "TopicPartitions", topic_id=ids, partitions=tuple(sorted(assignment[name]))
            )
        )
    return tuple(entries)


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)
