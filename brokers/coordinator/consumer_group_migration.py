"""Mixed consumer groups (KIP-848 with classic members) and the upgrade of a classic group.

Owns, as Kafka 4.1's GroupMetadataManager with `group.consumer.migration.policy=bidirectional`
does it for the upgrade direction:
- `upgrade`: a ConsumerGroupHeartbeat joining a group id held by a classic group with members
  converts it (`ConsumerGroup.fromClassicGroup`): the group must use the `consumer` protocol type
  and every member's subscription must parse (else GROUP_ID_NOT_FOUND "Group X is not a consumer
  group."); the consumer group takes the classic generation as its epoch, each member's current
  assignment as its target, and the members, which stay classic-protocol members; their parked
  JoinGroup/SyncGroup get REBALANCE_IN_PROGRESS. The classic group keeps the offsets, member-less.
- `join` / `sync` / `heartbeat` / `leave`: a classic member of a non-empty consumer group is
  served through JoinGroup/SyncGroup/Heartbeat/LeaveGroup as Kafka's `classicGroup*ToConsumerGroup`:
  JoinGroup reconciles it like a consumer heartbeat (its subscription and owned partitions read
  from its protocol metadata) and answers generation = member epoch, protocol = its first one, no
  leader; SyncGroup hands it the partitions it may own now as a ConsumerProtocolAssignment;
  Heartbeat answers REBALANCE_IN_PROGRESS when it must rejoin: the group epoch moved past its
  epoch, it must revoke partitions, or partitions of its target are now free. Kafka's timeouts
  of classic members: one told REBALANCE_IN_PROGRESS that does not rejoin within its rebalance
  timeout, or that does not sync within it after a join, is fenced (`ConsumerGroups.expire`).
- `route`: which group a classic request goes to. A consumer group left with classic members only
  is downgraded there when its last consumer-protocol member leaves (the heartbeat handler calls
  it), and by `downgrade_expired` at once after an expiry or fencing (the coordinator's timer
  tick), as Kafka: the member-less classic group that kept the offsets takes the members back (their protocols, current assignments, generation = the group
  epoch) and rebalances; the consumer group's records are tombstoned.
`group.consumer.migration.policy` (bidirectional by default) gates each direction as Kafka: no
upgrade means GROUP_ID_NOT_FOUND, no downgrade means the classic members keep being served by
the consumer group. The classic members' protocols and session timeouts are persisted with the
group (ClassicMemberMetadata, `consumer_group_image`), so a coordinator failover keeps serving
them. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from brokers.common.clock import Clock
from brokers.coordinator.binary import Writer
from brokers.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroups,
    ConsumerMember,
    HeartbeatRequest,
    Partitions,
)
from brokers.coordinator.consumer_group_migration_state import ClassicMembership
from brokers.coordinator.consumer_group_regex import TopicNames
from brokers.coordinator.consumer_group_store import ConsumerGroupStore
from brokers.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from brokers.coordinator.errors import (
    GroupError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from brokers.coordinator.group import Group, GroupState
from brokers.coordinator.member import Member, Protocols
from brokers.coordinator.rebalance import Rebalancer
from brokers.coordinator.results import JoinResult, SyncResult

log = logging.getLogger("pier.coordinator.consumer")
UPGRADE_POLICIES = ("bidirectional", "upgrade")
DOWNGRADE_POLICIES = ("bidirectional", "downgrade")
PartitionCounts = Callable[[str], int | None]
MAX_PROTOCOLS = 64


class GroupCoordinator(Protocol):
    """What the conversions use of `group_coordinator.GroupCoordinator` (which calls
    `downgrade_expired`, so this module cannot import it)."""

    clock: Clock
    groups: dict[str, Group]
    consumer_groups: ConsumerGroups
    consumer_store: ConsumerGroupStore
    rebalancer: Rebalancer

    def check(self, group_id: str) -> GroupError | None: ...


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: frozenset[str]
    owned: Partitions


@dataclass(frozen=True, slots=True)
class ClassicJoin:
    group_id: str
    member_id: str
    instance_id: str | None
    protocol_type: str | None
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool


class _Bytes:
    """A cursor over the classic (non-flexible) consumer protocol encoding; ValueError when short."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _unpack(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError("consumer protocol bytes end early")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(value)

    def int16(self) -> int:
        return self._unpack(">h")

    def int32(self) -> int:
        return self._unpack(">i")

    def skip_bytes(self) -> None:
        """Nullable bytes (user data): skipped."""
        size = self.int32()
        if size > len(self.data) - self.pos:
            raise ValueError("consumer protocol bytes end early")
        self.pos += max(size, 0)

    def string(self) -> str:
        size = self.int16()
        if size < 0 or self.pos + size > len(self.data):
            raise ValueError("bad string in consumer protocol bytes")
        text = self.data[self.pos : self.pos + size].decode("utf-8")
        self.pos += size
        return text

    def count(self) -> int:
        size = self.int32()
        if size < 0 or size > len(self.data) - self.pos:
            raise ValueError("bad array in consumer protocol bytes")
        return size

    def partitions(self) -> Partitions:
        found: Partitions = {}
        for _ in range(self.count()):
            topic = self.string()
            found.setdefault(topic, set()).update(self.int32() for _ in range(self.count()))
        return {t: p for t, p in found.items() if p}


def decode_subscription(metadata: bytes) -> Subscription:
    """A ConsumerProtocolSubscription (v0: topics, user data; v1+: owned partitions; later
    fields ignored); ValueError when it does not parse."""
    cursor = _Bytes(metadata)
    version = cursor.int16()
    topics = frozenset(cursor.string() for _ in range(cursor.count()))
    cursor.skip_bytes()  # user data
    owned = cursor.partitions() if version >= 1 else {}
    return Subscription(topics, owned)


def decode_assignment(data: bytes) -> Partitions:
    """A ConsumerProtocolAssignment's partitions (every version starts so); {} for none."""
    if not data:
        return {}
    cursor = _Bytes(data)
    cursor.int16()
    return cursor.partitions()


def encode_assignment(partitions: Partitions) -> bytes:
    """A ConsumerProtocolAssignment v0 (topics and partitions, no user data)."""
    writer = Writer().int16(0).int32(len(partitions))
    for topic in sorted(partitions):
        parts = sorted(partitions[topic])
        writer.string(topic).int32(len(parts))
        for p in parts:
            writer.int32(p)
    return writer.int32(-1).build()  # null user data


def _subscription_of(protocols: Protocols) -> Subscription | None:
    try:
        return decode_subscription(protocols[0][1]) if protocols else None
    except (ValueError, UnicodeDecodeError):
        return None


# ---- upgrade ---------------------------------------------------------------------------------
def upgrade(
    groups: ConsumerGroups, classic: Group, counts: PartitionCounts
) -> ConsumerGroup | GroupError:
    """Convert a classic group with members into a consumer group (Kafka's fromClassicGroup)."""
    not_consumer = GroupIdNotFoundError(f"Group {classic.group_id} is not a consumer group.")
    if groups.config.consumer_migration_policy not in UPGRADE_POLICIES:
        return _refused(classic, "online upgrade is disabled", not_consumer)
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE or not classic.protocol_name:
        return _refused(classic, "not the consumer embedded protocol", not_consumer)
    protocol = classic.protocol_name
    members: list[tuple[ConsumerMember, ClassicMembership]] = []
    now = groups.clock.monotonic()
    for m in classic.members.values():
        try:
            subscription = decode_subscription(m.metadata(protocol))
            assigned = decode_assignment(m.assignment)
        except ValueError:  # UnicodeDecodeError included
            return _refused(
                classic, f"member {m.member_id}'s protocol does not parse", not_consumer
            )
        member = ConsumerMember(
            m.member_id, m.client_id, m.client_host, m.group_instance_id, None,
            subscribed=subscription.topics, epoch=classic.generation_id,
            previous_epoch=classic.generation_id - 1, assigned=assigned,
            sent={t: set(p) for t, p in assigned.items()},
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            deadline=now + m.session_timeout_ms / 1000,
        )  # fmt: skip
        info = ClassicMembership(
            ((protocol, m.metadata(protocol)),), m.session_timeout_ms, m.rebalance_timeout_ms
        )
        members.append((member, info))
    group = ConsumerGroup(classic.group_id, assignor=groups.config.consumer_assignors[0])
    group.epoch = group.target_epoch = classic.generation_id
    for member, info in members:
        group.members[member.member_id] = member
        group.classic[member.member_id] = info
        group.target[member.member_id] = {t: set(p) for t, p in member.assigned.items()}
    topics = {t for member, _ in members for t in member.subscribed}
    group.counts = {t: c for t in sorted(topics) if (c := counts(t))}
    _empty_classic(classic)
    groups.groups[group.group_id] = group
    log.info(
        "event=classic_group_upgraded group=%s epoch=%d members=%d",
        group.group_id, group.epoch, len(group.members),
    )  # fmt: skip
    return group


def _refused(classic: Group, reason: str, error: GroupError) -> GroupError:
    log.info("event=classic_group_not_upgraded group=%s reason=%r", classic.group_id, reason)
    return error


def _empty_classic(classic: Group) -> None:
    """The classic group keeps the offsets only: its members now belong to the consumer group."""
    for member in list(classic.members.values()):
        member.complete_join(JoinResult.failed(member.member_id, RebalanceInProgressError()))
        member.complete_sync(SyncResult(error=RebalanceInProgressError()))
        classic.remove(member.member_id)
    classic.pending_members.clear()
    classic.join_deadline = classic.sync_deadline = None
    classic.initial_delay_ms = None
    classic.leader_id = None
    classic.subscribed_topics = None
    # Not a rebalance's outcome, so not a `transition_to`: the group is left as a member-less one.
    classic.previous_state, classic.state = classic.state, GroupState.EMPTY


# ---- downgrade -------------------------------------------------------------------------------
async def route(coordinator: GroupCoordinator, group_id: str) -> ConsumerGroup | None:
    """The consumer group a classic request for `group_id` goes to, or None for the classic
    path (no such group, an empty one, or one just downgraded to a classic group)."""
    groups = coordinator.consumer_groups
    group = serves(groups, group_id)
    if group is None or coordinator.check(group_id) is not None:
        return None
    if len(group.classic) < len(group.members):  # consumer-protocol members remain
        return group
    if groups.config.consumer_migration_policy not in DOWNGRADE_POLICIES:
        return group
    downgrade(coordinator, group)
    await coordinator.consumer_store.delete(group_id)  # the consumer group's tombstones
    return None


def downgrade_expired(coordinator: GroupCoordinator, group_ids: Iterable[str]) -> None:
    """Groups that a session or rebalance timeout left with classic members only are downgraded
    at once, as Kafka's maybeDowngradeConsumerGroup after a fencing; the consumer group's
    tombstones are written in the background (`GroupCoordinator.tick` calls this)."""
    groups = coordinator.consumer_groups
    if groups.config.consumer_migration_policy not in DOWNGRADE_POLICIES:
        return
    for group_id in group_ids:
        group = serves(groups, group_id)
        if group is None or coordinator.check(group_id) is not None:
            continue
        if len(group.classic) == len(group.members):  # no consumer-protocol member left
            downgrade(coordinator, group)
            coordinator.consumer_store.flush_later([group_id])  # a forgotten group: tombstones


def downgrade(coordinator: GroupCoordinator, group: ConsumerGroup) -> Group:
    """Kafka's ClassicGroup.fromConsumerGroup, then a rebalance the members rejoin."""
    now_ms = coordinator.clock.time_ms()
    classic = coordinator.groups.get(group.group_id)
    if classic is None:
        classic = coordinator.groups[group.group_id] = Group(group.group_id, now_ms)
    infos = [(group.members[m], info) for m, info in group.classic.items() if m in group.members]
    for member, info in infos:
        classic.add(
            Member(
                member.member_id, member.instance_id, member.client_id, member.client_host,
                info.rebalance_timeout_ms, info.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                info.protocols, assignment=encode_assignment(_allowed(group, member)),
            ),
            None,
        )  # fmt: skip
    classic.protocol_type = CONSUMER_PROTOCOL_TYPE
    classic.generation_id = group.epoch
    classic.protocol_name = classic.select_protocol()
    # Not a rebalance's outcome: the members are installed as a stable generation, then rebalance.
    classic.previous_state, classic.state = classic.state, GroupState.STABLE
    coordinator.consumer_groups.forget([group.group_id])
    for joined in classic.members.values():
        coordinator.rebalancer.reschedule_heartbeat(classic, joined)
    coordinator.rebalancer.prepare_rebalance(
        classic, f"Downgrade group {group.group_id} from consumer to classic."
    )
    log.info("event=consumer_group_downgraded group=%s generation=%d members=%d",
             group.group_id, classic.generation_id, len(classic.members))  # fmt: skip
    return classic


# ---- classic members of a consumer group ------------------------------------------------------
def serves(groups: ConsumerGroups, group_id: str) -> ConsumerGroup | None:
    """The consumer group that classic requests for `group_id` go to: a non-empty one."""
    group = groups.groups.get(group_id)
    return group if group is not None and group.members else None


def join(
    groups: ConsumerGroups,
    group: ConsumerGroup,
    request: ClassicJoin,
    counts: PartitionCounts,
    names: TopicNames,
) -> JoinResult:
    """JoinGroup of a classic member into a consumer group (classicGroupJoinToConsumerGroup)."""
    member_id = request.member_id
    if not member_id:
        member_id = f"{request.client_id or 'consumer'}-{uuid.uuid4()}"
        if request.require_known_member_id:
            return JoinResult.failed(member_id, MemberIdRequiredError(member_id))
    subscription = None
    if request.protocol_type == CONSUMER_PROTOCOL_TYPE and len(request.protocols) <= MAX_PROTOCOLS:
        subscription = _subscription_of(request.protocols)
    if subscription is None:
        error = InconsistentGroupProtocolError(f"Member {member_id}'s protocols are not supported.")
        return JoinResult.failed(member_id, error)
    existing = group.members.get(member_id)
    if existing is not None and member_id not in group.classic:
        return JoinResult.failed(member_id, UnknownMemberIdError(member_id))
    heartbeat = HeartbeatRequest(
        group_id=group.group_id,
        member_id=member_id,
        member_epoch=0 if existing is None else existing.epoch,
        subscribed_topics=tuple(sorted(subscription.topics)),
        server_assignor=None,
        owned={} if existing is None else subscription.owned,
        client_id=request.client_id,
        client_host=request.client_host,
        instance_id=request.instance_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        classic=True,
    )
    result = groups.heartbeat(heartbeat, counts, names)
    if result.error is not None:
        return JoinResult.failed(member_id, result.error)
    member = group.members[member_id]
    info = ClassicMembership(
        request.protocols, request.session_timeout_ms, request.rebalance_timeout_ms
    )
    group.classic[member_id] = info
    now = groups.clock.monotonic()
    member.deadline = now + request.session_timeout_ms / 1000
    group.join_deadlines.pop(member_id, None)  # as Kafka: the join timer cancelled, a sync one set
    group.sync_deadlines[member_id] = now + request.rebalance_timeout_ms / 1000
    return JoinResult(
        member_id=member_id,
        generation_id=member.epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=info.protocol_name,
        leader_id="",
    )


def _classic_member(
    group: ConsumerGroup, member_id: str, generation: int
) -> tuple[ConsumerMember, ClassicMembership] | GroupError:
    member = group.members.get(member_id)
    info = group.classic.get(member_id)
    if member is None or info is None:
        return UnknownMemberIdError(f"Member {member_id} is not a classic member of the group.")
    if generation != member.epoch:
        return IllegalGenerationError(
            f"The request generation id {generation} is not equal to the member epoch "
            f"{member.epoch} of member {member_id}."
        )
    return member, info


def sync(
    groups: ConsumerGroups,
    group: ConsumerGroup,
    member_id: str,
    generation: int,
    protocol_type: str | None,
    protocol_name: str | None,
) -> SyncResult:
    found = _classic_member(group, member_id, generation)
    if isinstance(found, GroupError):
        return SyncResult(error=found)
    member, info = found
    if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
        return SyncResult(error=InconsistentGroupProtocolError("protocol type"))
    if protocol_name is not None and protocol_name != info.protocol_name:
        return SyncResult(error=InconsistentGroupProtocolError("protocol name"))
    if group.epoch > member.epoch and not _revoking(group, member):
        _must_rejoin(groups, group, member, info)
        return SyncResult(error=RebalanceInProgressError(f"group {group.group_id} rebalances"))
    group.sync_deadlines.pop(member_id, None)
    now = _allowed(group, member)
    member.sent = now
    member.deadline = groups.clock.monotonic() + info.session_timeout_ms / 1000
    return SyncResult(
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=info.protocol_name,
        assignment=encode_assignment(now),
    )


def heartbeat(
    groups: ConsumerGroups, group: ConsumerGroup, member_id: str, generation: int
) -> GroupError | None:
    found = _classic_member(group, member_id, generation)
    if isinstance(found, GroupError):
        return found
    member, info = found
    member.deadline = groups.clock.monotonic() + info.session_timeout_ms / 1000
    if member.epoch < group.epoch or _revoking(group, member) or _free_to_take(group, member):
        _must_rejoin(groups, group, member, info)
        return RebalanceInProgressError(f"group {group.group_id}: rejoin to catch up")
    return None


def _must_rejoin(
    groups: ConsumerGroups, group: ConsumerGroup, member: ConsumerMember, info: ClassicMembership
) -> None:
    """Told REBALANCE_IN_PROGRESS: fenced unless it rejoins within its rebalance timeout (Kafka's
    join timeout, set if absent)."""
    deadline = groups.clock.monotonic() + info.rebalance_timeout_ms / 1000
    group.join_deadlines.setdefault(member.member_id, deadline)


def leave(groups: ConsumerGroups, group: ConsumerGroup, member_ids: Iterable[str]) -> list[bool]:
    """Remove the named members; True for each one that was in the group."""
    found = []
    for member_id in member_ids:
        present = member_id in group.members
        if present:
            groups.remove_member(group, member_id, "left")
        group.classic.pop(member_id, None)
        found.append(present)
    return found


def _allowed(group: ConsumerGroup, member: ConsumerMember) -> Partitions:
    target = group.target.get(member.member_id, {})
    now = {t: p & target.get(t, set()) for t, p in member.assigned.items()}
    return {t: p for t, p in now.items() if p}


def _revoking(group: ConsumerGroup, member: ConsumerMember) -> bool:
    target = group.target.get(member.member_id, {})
    return any(parts - target.get(t, set()) for t, parts in member.assigned.items())


def _free_to_take(group: ConsumerGroup, member: ConsumerMember) -> bool:
    target = group.target.get(member.member_id, {})
    taken = {
        (t, p)
        for other in group.members.values()
        if other.member_id != member.member_id
        for t, parts in other.assigned.items()
        for p in parts
    }
    return any(
        (t, p) not in taken
        for t, parts in target.items()
        for p in parts - member.assigned.get(t, set())
    )
