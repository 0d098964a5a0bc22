"""KIP-848 consumer groups: ConsumerGroupHeartbeat's state machine on the coordinator.

Owns: `ConsumerGroups` — the consumer groups of the offsets partitions this broker coordinates
(the caller checks ownership first), each with a group epoch, a target assignment computed by a
server-side assignor (`brokers.coordinator.consumer_assignors`) and members that reconcile to it
incrementally: a member first gives up the partitions its target no longer holds (its epoch
stays until its heartbeat stops listing them), then takes the new ones that no other member
still owns, and its epoch becomes the target's. Members that miss
`group.consumer.session.timeout.ms` are removed by `expire()` (their partitions are then free), and
so are members that do not revoke within their RebalanceTimeoutMs (fenced, as Kafka). Static
members (InstanceId) follow Kafka's replace rules (`consumer_group_static`). Also validates offset
commits of consumer groups (member id + member epoch, KIP-848).

This module changes state in memory only; `consumer_group_store` writes every change to
`__consumer_offsets` (Kafka's records) and installs loaded groups, so a coordinator failover keeps
epochs and assignments. A field added to `ConsumerGroup`/`ConsumerMember` is not persisted unless
the store's image includes it. See docs/design.md. A member's subscription is its topic names
plus what its SubscribedTopicRegex matches (`brokers.coordinator.consumer_group_regex`, resolved
again periodically); a change in what a regex matches bumps the group epoch. Mixed groups: a
group may hold classic-protocol members (`ConsumerGroup.classic`), reconciled here like the
others but joined, synced and told to rejoin through the classic APIs; the upgrade from and the
downgrade to a classic group are `brokers.coordinator.consumer_group_migration`'s (`classic` is
persisted as Kafka's ClassicMemberMetadata). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from brokers.common.clock import Clock
from brokers.coordinator.config import GroupConfig
from brokers.coordinator.consumer_assignors import Assignment, assign
from brokers.coordinator.consumer_group_migration_state import ClassicMembership
from brokers.coordinator.consumer_group_regex import (
    GroupRegexes,
    TopicNames,
    effective,
    in_use,
    no_topics,
)
from brokers.coordinator.consumer_group_static import check_static, leave_static, replace_static
from brokers.coordinator.errors import (
    FencedMemberEpochError,
    GroupError,
    IllegalGenerationError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnsupportedAssignorError,
)

log = logging.getLogger("pier.coordinator.consumer")
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
Partitions = dict[str, set[int]]
PartitionCounts = Callable[[str], int | None]


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str  # empty on a v0 join: the coordinator names the member
    member_epoch: int
    subscribed_topics: tuple[str, ...] | None  # None: unchanged
    server_assignor: str | None
    owned: Partitions | None  # None: unchanged since the last heartbeat
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    subscribed_regex: str | None = None  # None: unchanged; "": none (consumer_group_regex)
    rebalance_timeout_ms: int = -1  # -1: unchanged
    classic: bool = False  # a classic member's JoinGroup (consumer_group_migration)


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: GroupError | None
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Partitions | None = None  # None: unchanged


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None
    rack_id: str | None
    subscribed: frozenset[str] = frozenset()
    regex: str = ""  # SubscribedTopicRegex ("": none), resolved by the group's `regexes`
    assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    assigned: Partitions = field(default_factory=dict)  # may own now (revocations included)
    sent: Partitions | None = None  # the assignment last put in a response
    rebalance_timeout_ms: int = -1  # how long it may take to revoke (its RebalanceTimeoutMs)
    revoke_deadline: float | None = None  # set while it must revoke partitions
    deadline: float = 0.0


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    target_epoch: int = 0
    target: Assignment = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # subscribed topics' partition counts
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    assignor: str = "uniform"
    regexes: GroupRegexes = field(default_factory=GroupRegexes)
    # classic-protocol members (mixed groups, consumer_group_migration): member id → protocols
    classic: dict[str, ClassicMembership] = field(default_factory=dict)
    # Kafka's join and sync timeouts of classic members (monotonic s; not persisted, as Kafka's
    # timers): fenced unless they rejoin after a REBALANCE_IN_PROGRESS / sync after a join in time
    join_deadlines: dict[str, float] = field(default_factory=dict)
    sync_deadlines: dict[str, float] = field(default_factory=dict)

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.target_epoch != self.epoch:
            return "Assigning"
        settled = all(
            m.epoch == self.target_epoch and m.assigned == self.target.get(m.member_id, {})
            for m in self.members.values()
        )
        return "Stable" if settled else "Reconciling"


class ConsumerGroups:
    def __init__(self, config: GroupConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.groups: dict[str, ConsumerGroup] = {}

    # ---- ConsumerGroupHeartbeat -----------------------------------------------------------
    def heartbeat(
        self, request: HeartbeatRequest, counts: PartitionCounts, names: TopicNames = no_topics
    ) -> HeartbeatResult:
        interval = self.config.consumer_heartbeat_interval_ms
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request, interval)
        error = self._check_assignor(request.server_assignor)
        if error is not None:
            return HeartbeatResult(error, request.member_id, request.member_epoch, interval)
        group = self.groups.get(request.group_id)
        changed = False
        if request.member_epoch == 0:
            group = group or self._create(request.group_id)
            replaced = replace_static(
                group.group_id, group.members, group.target, request, _classic(group, request)
            )
            for gone in set(group.classic) - set(group.members):  # a replaced classic member
                del group.classic[gone]
            if isinstance(replaced, GroupError):
                return HeartbeatResult(replaced, request.member_id, request.member_epoch, interval)
            member, changed = (
                (replaced, False) if replaced is not None else self._join(group, request)
            )
        else:
            members = None if group is None else group.members
            member_or_error = check_static(members, request) or self._known(group, request)
            if isinstance(member_or_error, GroupError):
                return HeartbeatResult(
                    member_or_error, request.member_id, request.member_epoch, interval
                )
            member = member_or_error
            assert group is not None
        changed = self._update_subscription(member, request) or changed
        changed = self._refresh_regexes(group, names) or changed
        self._refresh_target(group, counts, changed)
        member.deadline = self.clock.monotonic() + self.config.consumer_session_timeout_ms / 1000
        self._reconcile(group, member, request.owned)
        if request.owned is not None and _nonempty(request.owned) != member.sent:
            member.sent = None  # it reports something else (a lost response): send it in full
        assignment = _send(group, member)
        return HeartbeatResult(None, member.member_id, member.epoch, interval, assignment)

    def _check_assignor(self, name: str | None) -> GroupError | None:
        if name is not None and name not in self.config.consumer_assignors:
            return UnsupportedAssignorError(f"server assignor {name!r} is not supported")
        return None

    def _create(self, group_id: str) -> ConsumerGroup:
        group = ConsumerGroup(group_id, assignor=self.config.consumer_assignors[0])
        self.groups[group_id] = group
        return group

    def _join(self, group: ConsumerGroup, request: HeartbeatRequest) -> tuple[ConsumerMember, bool]:
        member = group.members.get(request.member_id) if request.member_id else None
        if member is not None:  # a rejoin: the member gave up everything it owned
            member.assigned, member.sent, member.epoch = {}, None, 0
            return member, False
        member_id = request.member_id or uuid.uuid4().hex
        member = ConsumerMember(
            member_id, request.client_id, request.client_host, request.instance_id,
            request.rack_id,
        )  # fmt: skip
        group.members[member_id] = member
        log.info("event=consumer_member_joined group=%s member=%s", group.group_id, member_id)
        return member, True

    def _known(
        self, group: ConsumerGroup | None, request: HeartbeatRequest
    ) -> ConsumerMember | GroupError:
        member = None if group is None else group.members.get(request.member_id)
        if member is None:
            return UnknownMemberIdError(f"member {request.member_id!r} is not in the group")
        if request.member_epoch == member.epoch:
            return member
        owned = request.owned
        if (
            request.member_epoch == member.previous_epoch
            and owned is not None
            and all(parts <= member.assigned.get(t, set()) for t, parts in owned.items())
        ):
            return member  # it missed our last response: resend it
        return FencedMemberEpochError(f"member epoch {request.member_epoch} is not {member.epoch}")

    def _update_subscription(self, member: ConsumerMember, request: HeartbeatRequest) -> bool:
        changed = False
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.subscribed_topics is not None:
            topics = frozenset(request.subscribed_topics)
            changed = topics != member.subscribed
            member.subscribed = topics
        if request.subscribed_regex is not None and request.subscribed_regex != member.regex:
            member.regex = request.subscribed_regex
            changed = True
        if request.server_assignor is not None and request.server_assignor != member.assignor:
            member.assignor = request.server_assignor
            changed = True
        return changed

    def _refresh_regexes(self, group: ConsumerGroup, names: TopicNames) -> bool:
        regexes = in_use({m.member_id: m.regex for m in group.members.values()})
        interval = self.config.consumer_regex_refresh_interval_ms
        return group.regexes.refresh(regexes, names, self.clock.monotonic(), interval)

    def _refresh_target(self, group: ConsumerGroup, counts: PartitionCounts, changed: bool) -> None:
        """One group epoch bump per heartbeat that changed the membership, a subscription or a
        subscribed topic's partition count (as Kafka); then the target is recomputed."""
        subscriptions = {
            m.member_id: effective(m.subscribed, m.regex, group.regexes)
            for m in group.members.values()
        }
        current: dict[str, int] = {}
        for topic in sorted({t for topics in subscriptions.values() for t in topics}):
            count = counts(topic)
            if count:
                current[topic] = count
        if current != group.counts:
            group.counts = current
            changed = True
        if changed:
            group.epoch += 1
        if group.target_epoch == group.epoch:
            return
        chosen = [m.assignor for m in group.members.values() if m.assignor]
        group.assignor = chosen[0] if chosen else self.config.consumer_assignors[0]
        group.target = assign(group.assignor, subscriptions, group.counts, group.target)
        group.target_epoch = group.epoch
        log.info(
            "event=consumer_target_assigned group=%s epoch=%d assignor=%s members=%d",
            group.group_id, group.epoch, group.assignor, len(group.members),
        )  # fmt: skip

    def _reconcile(
        self, group: ConsumerGroup, member: ConsumerMember, owned: Partitions | None
    ) -> None:
        """Revoke first (the epoch waits), then take the free new partitions and the epoch."""
        target = group.target.get(member.member_id, {})
        if owned is not None:  # partitions it no longer lists are released
            for topic in list(member.assigned):
                kept = member.assigned[topic] & (owned.get(topic, set()) | target.get(topic, set()))
                if kept:
                    member.assigned[topic] = kept
                else:
                    del member.assigned[topic]
        if any(parts - target.get(t, set()) for t, parts in member.assigned.items()):
            if member.revoke_deadline is None:  # fenced if it does not revoke in time (expire)
                member.revoke_deadline = self.clock.monotonic() + self._rebalance_s(member)
            return  # still revoking: the response gives it the retained partitions only
        member.revoke_deadline = None
        taken = _owned_by_others(group, member.member_id)
        for topic, parts in target.items():
            free = {p for p in parts if (topic, p) not in taken}
            if free:
                member.assigned[topic] = member.assigned.get(topic, set()) | free
        if member.epoch != group.target_epoch:
            member.previous_epoch, member.epoch = member.epoch, group.target_epoch

    def _rebalance_s(self, member: ConsumerMember) -> float:
        timeout = member.rebalance_timeout_ms
        return (timeout if timeout >= 0 else self.config.consumer_session_timeout_ms) / 1000

    def _leave(self, request: HeartbeatRequest, interval: int) -> HeartbeatResult:
        group = self.groups.get(request.group_id)
        error = check_static(None if group is None else group.members, request)
        if group is None or request.member_id not in group.members or error is not None:
            error = error or UnknownMemberIdError(
                f"member {request.member_id!r} is not in the group"
            )
            return HeartbeatResult(error, request.member_id, request.member_epoch, interval)
        if request.member_epoch == STATIC_LEAVE_EPOCH and request.instance_id is not None:
            session = self.config.consumer_session_timeout_ms / 1000
            leave_static(group.members[request.member_id], self.clock.monotonic() + session)
            return HeartbeatResult(None, request.member_id, STATIC_LEAVE_EPOCH, interval)
        self._remove(group, request.member_id, "left")
        return HeartbeatResult(None, request.member_id, request.member_epoch, interval)

    def remove_member(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        """A member removed by a request other than its heartbeat (LeaveGroup of a classic one)."""
        self._remove(group, member_id, why)

    def _remove(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        group.classic.pop(member_id, None)
        group.join_deadlines.pop(member_id, None)
        group.sync_deadlines.pop(member_id, None)
        del group.members[member_id]
        group.target.pop(member_id, None)
        group.epoch += 1
        log.info("event=consumer_member_removed group=%s member=%s why=%s", group.group_id,
                 member_id, why)  # fmt: skip

    # ---- timers, ownership, offsets -------------------------------------------------------
    def expire(self) -> int:
        """Remove members whose session timed out, and fence those that did not revoke within
        their rebalance timeout, and classic members that did not rejoin or sync within theirs
        (as Kafka: their partitions are freed, the group epoch bumps and their next heartbeat is
        answered UNKNOWN_MEMBER_ID). Returns how many."""
        return sum(len(removed) for removed in self.expire_members().values())

    def expire_members(self) -> dict[str, list[str]]:
        """`expire`, by group: the members removed from each group that lost any. Runs every
        tick (100 ms) over every group this broker coordinates, so a group without members
        (kept until its offsets expire: a tenant may hold thousands) costs one test."""
        now = self.clock.monotonic()
        removed: dict[str, list[str]] = {}
        for group in self.groups.values():
            if not group.members:
                continue
            for member in list(group.members.values()):
                why = _expired(group, member, now)
                if why is not None:
                    self._remove(group, member.member_id, why)
                    removed.setdefault(group.group_id, []).append(member.member_id)
        return removed

    def forget(self, group_ids: Iterable[str]) -> None:
        for group_id in group_ids:
            self.groups.pop(group_id, None)

    def validate_commit(self, group_id: str, member_id: str, epoch: int) -> GroupError | None:
        """KIP-848's offset commit check of a consumer group (the caller knows it is one)."""
        group = self.groups[group_id]
        member = group.members.get(member_id)
        if member is None:
            if epoch < 0 and not member_id and not group.members:
                return None  # an administrative commit to an empty group
            return UnknownMemberIdError(f"member {member_id!r} is not in the group")
        return _epoch_error(group, member, epoch)

    def validate_fetch(self, group_id: str, member_id: str | None, epoch: int) -> GroupError | None:
        """OffsetFetch v9's check: none for other groups or without a member (an admin's read)."""
        group = self.groups.get(group_id)
        if group is None or (epoch < 0 and not member_id):
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return UnknownMemberIdError(f"member {member_id!r} is not in the group")
        return _epoch_error(group, member, epoch)


def _epoch_error(group: ConsumerGroup, member: ConsumerMember, epoch: int) -> GroupError | None:
    """An epoch that is not the member's: STALE_MEMBER_EPOCH, or, for a member served through the
    classic protocol (a mixed group), ILLEGAL_GENERATION, the code its client rejoins on (Kafka's
    ConsumerGroup.validateMemberEpoch)."""
    if epoch == member.epoch:
        return None
    if member.member_id in group.classic:
        return IllegalGenerationError(f"generation {epoch} is not the member epoch {member.epoch}")
    return StaleMemberEpochError(f"member epoch {epoch} is not {member.epoch}")


def _expired(group: ConsumerGroup, member: ConsumerMember, now: float) -> str | None:
    """Why the member is removed now, if it is."""
    if member.deadline <= now:
        return "session_timeout"
    if member.revoke_deadline is not None and member.revoke_deadline <= now:
        return "rebalance_timeout"
    if group.join_deadlines.get(member.member_id, now + 1) <= now:
        return "join_timeout"  # a classic member that did not rejoin
    if group.sync_deadlines.get(member.member_id, now + 1) <= now:
        return "sync_timeout"  # a classic member that did not sync after its join
    return None


def _classic(group: ConsumerGroup, request: HeartbeatRequest) -> bool:
    """Whether the joining static member or the one holding its instance id is classic."""
    if request.classic:
        return True
    return any(
        m.instance_id == request.instance_id and m.member_id in group.classic
        for m in group.members.values()
    )


def _send(group: ConsumerGroup, member: ConsumerMember) -> Partitions | None:
    """What the member may own now (partitions being revoked left out), when that changed."""
    target = group.target.get(member.member_id, {})
    now = {t: p & target.get(t, set()) for t, p in member.assigned.items()}
    now = {t: p for t, p in now.items() if p}
    if now == member.sent:
        return None
    member.sent = now
    return now


def _nonempty(partitions: Partitions) -> Partitions:
    return {t: set(p) for t, p in partitions.items() if p}


def _owned_by_others(group: ConsumerGroup, member_id: str) -> set[tuple[str, int]]:
    return {
        (t, p)
        for other in group.members.values()
        if other.member_id != member_id
        for t, parts in other.assigned.items()
        for p in parts
    }


def as_partitions(pairs: Mapping[str, Iterable[int]]) -> Partitions:
    return {t: set(parts) for t, parts in pairs.items()}
