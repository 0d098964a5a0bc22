"""One classic consumer group: its state machine, members, generation and chosen protocol.

Owns: `GroupState` and `Group` (Kafka's GroupMetadata / ClassicGroup) — the legal transitions
(Empty → PreparingRebalance → CompletingRebalance → Stable, any → Dead), membership bookkeeping
(dynamic members, KIP-394 pending members, KIP-345 static members), the protocol vote, the next
generation, the subscribed topics of `consumer` groups, and the group's committed offsets. The
rebalance *policy* (when to rebalance, timers, persistence) lives in `rebalance`; this module only
keeps the state consistent. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Mapping

from brokers.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from brokers.coordinator.errors import FencedInstanceIdError, GroupError, UnknownMemberIdError
from brokers.coordinator.group_records import GroupMetadataRecord, MemberRecord, OffsetAndMetadata
from brokers.coordinator.member import Member, Protocols
from brokers.coordinator.offsets import BaseTimestamp, GroupOffsets
from brokers.coordinator.results import JoinedMember, JoinResult, SyncResult


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.DEAD: frozenset(GroupState),
}


class Group:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.previous_state = GroupState.EMPTY
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group instance id → member id
        self.pending_members: dict[str, float] = {}  # KIP-394: id handed out → join deadline
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.completed_rebalances = 0
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets = GroupOffsets()
        self._supported: Counter[str] = Counter()
        # timers, in monotonic seconds; driven by the coordinator's tick
        self.join_deadline: float | None = None
        self.initial_delay_ms: tuple[int, int] | None = None  # (delay, remaining) of KIP-134
        self.sync_deadline: float | None = None

    @classmethod
    def from_record(cls, group_id: str, record: GroupMetadataRecord, now_ms: int) -> Group:
        """A group read back from its metadata record: Stable if it had members, else Empty."""
        group = cls(group_id, now_ms)
        stamp = record.current_state_timestamp_ms
        group.state_timestamp_ms = stamp if stamp >= 0 else None
        group.generation_id = record.generation
        group.protocol_type = record.protocol_type or None
        group.protocol_name = record.protocol
        for m in record.members:
            protocols = ((record.protocol or "", m.subscription),)
            member = Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms, m.session_timeout_ms, record.protocol_type, protocols,
                assignment=m.assignment,
            )  # fmt: skip
            group.add(member, None)
        group.protocol_type = record.protocol_type or None
        group.leader_id = record.leader if record.leader in group.members else group.leader_id
        if group.members:
            group.state = GroupState.STABLE
        group.subscribed_topics = group._compute_subscribed_topics()
        return group

    # ---- state ----------------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: illegal transition {self.state} → {state}")
        self.previous_state, self.state = self.state, state
        self.state_timestamp_ms = now_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ---- membership -----------------------------------------------------------------------
    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member, future: asyncio.Future[JoinResult] | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._supported.update(member.protocol_names)
        member.join_future = future
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._supported.subtract(member.protocol_names)
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
            # Never leave a parked request hanging on a member that no longer exists.
            member.complete_join(JoinResult.failed("", UnknownMemberIdError(member_id)))
            member.complete_sync(SyncResult(error=UnknownMemberIdError(member_id)))
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """KIP-345: a restarted static member takes over its old entry under a new member id."""
        member = self.members.pop(old_id)
        # Fence a duplicate instance still parked in a join or sync right away.
        member.complete_join(JoinResult.failed(old_id, FencedInstanceIdError(instance_id)))
        member.complete_sync(SyncResult(error=FencedInstanceIdError(instance_id)))
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[instance_id] = new_id
        return member

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        future: asyncio.Future[JoinResult] | None,
    ) -> None:
        self._supported.subtract(member.protocol_names)
        member.protocols = protocols
        self._supported.update(member.protocol_names)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_future = future

    def validate_member(self, member_id: str, instance_id: str | None) -> GroupError | None:
        """KIP-345 checks: the instance id must map to this member id, and the member exist."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return UnknownMemberIdError(member_id)
            if current != member_id:
                return FencedInstanceIdError(instance_id)
        if member_id not in self.members:
            return UnknownMemberIdError(member_id)
        return None

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False if none did."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.is_awaiting_join:
            return True
        joined = next((m for m in self.members.values() if m.is_awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ---- protocols ------------------------------------------------------------------------
    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        size = len(self.members)
        return self.protocol_type == protocol_type and any(
            self._supported[name] == size for name in names
        )

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote)."""
        size = len(self.members)
        candidates = {name for name, count in self._supported.items() if count == size}
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        try:
            return frozenset().union(
                *(subscribed_topics(m.metadata(self.protocol_name)) for m in self.members.values())
            )
        except GroupError:  # a subscription we cannot parse: we do not know the topics
            return None

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in self.subscribed_topics

    def current_member_metadata(self) -> tuple[JoinedMember, ...]:
        assert self.protocol_name is not None
        protocol = self.protocol_name
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        )

    # ---- persistence and offsets ----------------------------------------------------------
    def metadata_record(self, assignment: Mapping[str, bytes]) -> GroupMetadataRecord:
        protocol = self.protocol_name
        members = tuple(
            _member_record(m, protocol, assignment.get(m.member_id, b""))
            for m in self.members.values()
        )
        return GroupMetadataRecord(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id,
            current_state_timestamp_ms=-1
            if self.state_timestamp_ms is None
            else self.state_timestamp_ms,
            members=members,
        )

    def offset_expiration_base(self) -> BaseTimestamp | None:
        """KIP-211: which timestamp an offset's retention counts from, or None (keep all)."""
        if self.protocol_type is None:  # a simple (assign()) group: from each commit
            return _commit_time
        if self.state is GroupState.EMPTY:
            empty_since = self.state_timestamp_ms
            if empty_since is None:
                return _commit_time
            return lambda _value: empty_since
        if (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.state is GroupState.STABLE
        ):
            return _commit_time  # only offsets of topics nobody subscribes to any more
        return None


def _member_record(member: Member, protocol: str | None, assignment: bytes) -> MemberRecord:
    return MemberRecord(
        member_id=member.member_id,
        group_instance_id=member.group_instance_id,
        client_id=member.client_id,
        client_host=member.client_host,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        session_timeout_ms=member.session_timeout_ms,
        subscription=member.metadata(protocol) if protocol is not None else b"",
        assignment=assignment,
    )


def _commit_time(value: OffsetAndMetadata) -> int:
    return value.commit_timestamp_ms
