"""JoinGroup for classic groups: who may join, as which member, and whether that rebalances.

Owns: `JoinRequest` and `Joiner` — Kafka's join decision tree: the group size limit, new dynamic
members (KIP-394: MEMBER_ID_REQUIRED from v4, then a pending member with a session-long
deadline), new and restarted static members (KIP-345: a known instance replaces its old member id
and, when the group is Stable and its protocol choice does not change, keeps its assignment
without a rebalance — the group metadata is persisted before answering), and existing members
(a follower rejoining with unchanged metadata just gets the current generation back; the leader or
a changed member starts a rebalance). The answer is delivered through the member's future.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, replace

from brokers.coordinator.errors import (
    CoordinatorNotAvailableError,
    GroupError,
    GroupMaxSizeReachedError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from brokers.coordinator.group import Group, GroupState
from brokers.coordinator.member import Member, Protocols
from brokers.coordinator.rebalance import Rebalancer
from brokers.coordinator.results import UNKNOWN_MEMBER_ID, JoinResult

S = GroupState
JoinFuture = asyncio.Future[JoinResult]


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True  # JoinGroup v4+
    supports_skip_assignment: bool = True  # JoinGroup v9+
    reason: str | None = None

    @property
    def protocol_names(self) -> list[str]:
        """Each protocol name once, in preference order (Kafka keeps them as a set)."""
        return list(dict.fromkeys(name for name, _ in self.protocols))


def _fail(future: JoinFuture, member_id: str, error: GroupError) -> None:
    future.set_result(JoinResult.failed(member_id, error))


def _current_generation(group: Group, member_id: str, *, leader_view: bool) -> JoinResult:
    return JoinResult(
        member_id=member_id,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader_id=group.leader_id or "",
        members=group.current_member_metadata() if leader_view else (),
    )


class Joiner:
    def __init__(self, rebalancer: Rebalancer) -> None:
        self._rebalancer = rebalancer
        self._config = rebalancer.config

    async def join(self, group: Group, request: JoinRequest, future: JoinFuture) -> None:
        if not self._accepts(group, request.member_id):
            group.remove(request.member_id)
            _fail(future, UNKNOWN_MEMBER_ID, GroupMaxSizeReachedError(group.group_id))
        elif group.is_in(S.DEAD):
            _fail(future, request.member_id, CoordinatorNotAvailableError(group.group_id))
        elif not group.supports_protocols(request.protocol_type, request.protocol_names):
            _fail(future, request.member_id, InconsistentGroupProtocolError(group.group_id))
        elif request.member_id == UNKNOWN_MEMBER_ID:
            await self._join_new_member(group, request, future)
        else:
            self._join_existing_member(group, request, future)

    def _accepts(self, group: Group, member_id: str) -> bool:
        limit = self._config.max_size
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_in(S.PREPARING_REBALANCE):
            # Counting members already waiting lets the last ones to rejoin be the ones refused.
            return (member is not None and member.is_awaiting_join) or (
                group.num_awaiting_join < limit
            )
        return member is not None or len(group.members) < limit

    async def _join_new_member(
        self, group: Group, request: JoinRequest, future: JoinFuture
    ) -> None:
        prefix = request.group_instance_id or request.client_id
        member_id = f"{prefix}-{uuid.uuid4()}"
        instance_id = request.group_instance_id
        if instance_id is not None:
            existing = group.static_members.get(instance_id)
            if existing is not None:
                await self._replace_static_member(group, request, existing, member_id, future)
            else:
                self._add_member(group, request, member_id, future)
        elif request.require_known_member_id:
            self._rebalancer.add_pending_member(group, member_id, request.session_timeout_ms)
            _fail(future, member_id, MemberIdRequiredError(member_id))
        else:
            self._add_member(group, request, member_id, future)

    def _join_existing_member(self, group: Group, request: JoinRequest, future: JoinFuture) -> None:
        member_id = request.member_id
        if member_id in group.pending_members:
            self._add_member(group, request, member_id, future)
            return
        error = group.validate_member(member_id, request.group_instance_id)
        if error is not None:
            _fail(future, member_id, error)
            return
        member = group.members[member_id]
        unchanged = member.matches(request.protocols)
        if group.is_in(S.COMPLETING_REBALANCE) and unchanged:
            # It probably missed the JoinGroup response of this generation: send it again.
            leader = group.is_leader(member_id)
            future.set_result(_current_generation(group, member_id, leader_view=leader))
        elif group.is_in(S.STABLE) and unchanged and not group.is_leader(member_id):
            future.set_result(_current_generation(group, member_id, leader_view=False))
        elif group.is_in(S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE):
            # The leader rejoining forces a rebalance: that is how it reacts to metadata changes.
            self._update_member(group, member, request, future, "member rejoined")
        else:
            _fail(future, member_id, UnknownMemberIdError(member_id))

    def _add_member(
        self, group: Group, request: JoinRequest, member_id: str, future: JoinFuture
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            is_new=True,
        )
        if group.is_in(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True  # extends KIP-134's initial delay
        group.add(member, future)
        # Parked joins cannot heartbeat; a KIP-394 timeout drops clients that went away.
        timeout = self._config.new_member_join_timeout_ms
        self._rebalancer.reschedule_heartbeat(group, member, timeout)
        self._rebalancer.maybe_prepare_rebalance_or_complete_join(group, f"new member {member_id}")

    def _update_member(
        self, group: Group, member: Member, request: JoinRequest, future: JoinFuture, reason: str
    ) -> None:
        if member.join_future is not None and not member.join_future.done():
            # A duplicate join: answer the older one so its connection is not left hanging.
            member.complete_join(JoinResult.failed(member.member_id, RebalanceInProgressError()))
        group.update_member(
            member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            future,
        )
        self._rebalancer.maybe_prepare_rebalance_or_complete_join(group, reason)

    async def _replace_static_member(
        self, group: Group, request: JoinRequest, old_id: str, new_id: str, future: JoinFuture
    ) -> None:
        assert request.group_instance_id is not None
        instance_id = request.group_instance_id
        previous_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._rebalancer.reschedule_heartbeat(group, member)
        before = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(
            member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            future,
        )
        if group.is_in(S.STABLE):
            if group.protocol_name == group.select_protocol():
                await self._keep_assignment(group, member, before, old_id, previous_leader, request)
            else:
                self._rebalancer.prepare_rebalance(group, f"static {instance_id} changed protocol")
        elif group.is_in(S.COMPLETING_REBALANCE):
            # The leader may be assigning to the old member id: start over.
            self._rebalancer.prepare_rebalance(group, f"static {instance_id} rejoined")
        else:
            self._rebalancer.maybe_complete_join_phase(group)

    async def _keep_assignment(
        self,
        group: Group,
        member: Member,
        before: tuple[Protocols, int, int],
        old_id: str,
        previous_leader: str,
        request: JoinRequest,
    ) -> None:
        """KIP-345: persist the new member id, then answer without a rebalance."""
        new_id = member.member_id
        assignment = {m.member_id: m.assignment for m in group.members.values()}
        try:
            await self._rebalancer.store(group, assignment)
        except GroupError as exc:  # revert to the old member id; the client retries
            future = member.join_future
            group.update_member(member, *before, None)
            restored = group.replace_static_member(member.group_instance_id or "", new_id, old_id)
            self._rebalancer.reschedule_heartbeat(group, restored)
            if future is not None and not future.done():
                future.set_result(JoinResult.failed(UNKNOWN_MEMBER_ID, exc))
            return
        if request.supports_skip_assignment:
            # JoinGroup v9 (KIP-814): a static leader learns it leads but must not reassign.
            leader = group.is_leader(new_id)
            result = _current_generation(group, new_id, leader_view=leader)
            member.complete_join(replace(result, skip_assignment=leader))
        else:
            # Older clients: name the previous leader id so this member never thinks it leads.
            result = _current_generation(group, new_id, leader_view=False)
            member.complete_join(replace(result, leader_id=previous_leader))
