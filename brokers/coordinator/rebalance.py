"""The rebalance machinery of classic groups: generations, delayed joins and syncs, expiry.

Owns: `Rebalancer` — preparing a rebalance (KIP-134's initial delay for an empty group, the
rebalance timeout otherwise), completing the join phase (dropping dynamic members that did not
rejoin, electing a leader, the next generation, answering every parked JoinGroup), the pending-sync
timeout (KIP-814-era Kafka: members that never sync are removed), propagating assignments or
errors to parked SyncGroups, and the timers of members (session and KIP-394 join timeouts).
Deadlines are monotonic seconds in the groups; the coordinator's tick calls `expire` for groups
the `DeadlineQueue` says are due. Group metadata writes that no request waits for (a generation
that ends Empty) run as background tasks. Mirrors Kafka's GroupMetadataManager (classic part).
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Mapping
from typing import Protocol

from brokers.common.clock import Clock
from brokers.coordinator.config import GroupConfig
from brokers.coordinator.errors import GroupError, RebalanceInProgressError, UnknownMemberIdError
from brokers.coordinator.group import Group, GroupState
from brokers.coordinator.group_records import GroupMetadataRecord
from brokers.coordinator.member import Member
from brokers.coordinator.results import JoinResult, SyncResult
from brokers.coordinator.timers import DeadlineQueue

log = logging.getLogger("pier.coordinator")
S = GroupState


class GroupStore(Protocol):
    async def store_group(self, group_id: str, record: GroupMetadataRecord) -> None:
        """Append the group's metadata record; raises GroupError when it cannot."""
        ...


class Rebalancer:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        store: GroupStore,
        deadlines: DeadlineQueue,
        on_stable: Callable[[Group], None] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self._store = store
        self._deadlines = deadlines
        self._on_stable = on_stable
        self._writes: set[asyncio.Task[None]] = set()

    # ---- timers ---------------------------------------------------------------------------
    def reschedule_heartbeat(self, group: Group, member: Member, timeout_ms: int = -1) -> None:
        timeout = member.session_timeout_ms if timeout_ms < 0 else timeout_ms
        member.heartbeat_deadline = self.clock.monotonic() + timeout / 1000
        self._deadlines.schedule(member.heartbeat_deadline, group.group_id)

    def add_pending_member(self, group: Group, member_id: str, session_timeout_ms: int) -> None:
        deadline = self.clock.monotonic() + session_timeout_ms / 1000
        group.pending_members[member_id] = deadline
        self._deadlines.schedule(deadline, group.group_id)

    def _arm_join(self, group: Group, delay_ms: int) -> None:
        group.join_deadline = self.clock.monotonic() + delay_ms / 1000
        self._deadlines.schedule(group.join_deadline, group.group_id)

    def _arm_sync(self, group: Group) -> None:
        group.sync_deadline = self.clock.monotonic() + group.rebalance_timeout_ms / 1000
        self._deadlines.schedule(group.sync_deadline, group.group_id)

    def expire(self, group: Group) -> None:
        """Fire every timer of `group` that is due."""
        now = self.clock.monotonic()
        for member in list(group.members.values()):
            if member.heartbeat_deadline <= now and group.members.get(member.member_id) is member:
                member.heartbeat_deadline = math.inf
                if not member.has_satisfied_heartbeat():
                    log.info(
                        "event=member_expired group=%s member=%s", group.group_id, member.member_id
                    )
                    self.remove_member_and_update(group, member, "heartbeat expired")
        for member_id, deadline in list(group.pending_members.items()):
            if deadline <= now and member_id in group.pending_members:
                self.remove_pending_member_and_update(group, member_id)
        if group.join_deadline is not None and group.join_deadline <= now:
            group.join_deadline = None
            self._on_join_deadline(group)
        if group.sync_deadline is not None and group.sync_deadline <= now:
            group.sync_deadline = None
            self._on_sync_deadline(group)

    # ---- join phase -----------------------------------------------------------------------
    def maybe_prepare_rebalance_or_complete_join(self, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self.prepare_rebalance(group, reason)
        else:
            self.maybe_complete_join_phase(group)

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            self.reset_and_propagate_error(group, RebalanceInProgressError(group.group_id))
        group.sync_deadline = None
        group.pending_sync.clear()
        initial = group.is_in(S.EMPTY)
        group.transition_to(S.PREPARING_REBALANCE, self.clock.time_ms())
        log.info(
            "event=prepare_rebalance group=%s generation=%d reason=%r",
            group.group_id, group.generation_id, reason,
        )  # fmt: skip
        if initial:  # KIP-134: give the members of a new group time to arrive together
            delay = self.config.initial_rebalance_delay_ms
            group.initial_delay_ms = (delay, max(group.rebalance_timeout_ms - delay, 0))
            self._arm_join(group, delay)
        elif group.has_all_members_joined():
            self.complete_join(group)
        else:
            group.initial_delay_ms = None
            self._arm_join(group, group.rebalance_timeout_ms)

    def maybe_complete_join_phase(self, group: Group) -> None:
        # The initial rebalance of an empty group always waits out its delay.
        if (
            group.is_in(S.PREPARING_REBALANCE)
            and group.previous_state is not S.EMPTY
            and group.has_all_members_joined()
        ):
            self.complete_join(group)

    def _on_join_deadline(self, group: Group) -> None:
        delays = group.initial_delay_ms
        if delays is not None and group.new_member_added and delays[1] != 0:
            delay, remaining = delays  # a member arrived during the delay: wait a little more
            group.new_member_added = False
            next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.initial_delay_ms = (next_delay, max(remaining - delay, 0))
            self._arm_join(group, next_delay)
            return
        self.complete_join(group)

    def complete_join(self, group: Group) -> None:
        group.join_deadline = None
        group.initial_delay_ms = None
        for member in group.not_yet_rejoined():
            if not member.is_static:  # static members keep their place until their session ends
                group.remove(member.member_id)
        if group.is_in(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            self._arm_join(group, group.rebalance_timeout_ms)  # only absent static members left
            return
        group.init_next_generation(self.clock.time_ms())
        if group.is_in(S.EMPTY):
            log.info(
                "event=group_empty group=%s generation=%d", group.group_id, group.generation_id
            )
            self.store_in_background(group, {})
            return
        log.info(
            "event=group_joined group=%s generation=%d members=%d protocol=%s",
            group.group_id, group.generation_id, len(group.members), group.protocol_name,
        )  # fmt: skip
        everyone = group.current_member_metadata()
        for member in list(group.members.values()):
            leader = group.is_leader(member.member_id)
            member.complete_join(
                JoinResult(
                    member_id=member.member_id,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader_id=group.leader_id or "",
                    members=everyone if leader else (),
                )
            )
            self.reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self._arm_sync(group)

    # ---- sync phase -----------------------------------------------------------------------
    def remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync or not group.is_in(S.COMPLETING_REBALANCE, S.STABLE):
            group.sync_deadline = None

    def _on_sync_deadline(self, group: Group) -> None:
        if not group.is_in(S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
            return
        missing = sorted(group.pending_sync)
        for member_id in missing:
            group.remove(member_id)
        self.prepare_rebalance(group, f"members {missing} never sent SyncGroup")

    def reset_and_propagate_error(self, group: Group, error: GroupError) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate(group, error)

    def set_and_propagate_assignment(self, group: Group, assignment: Mapping[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate(group, None)

    def _propagate(self, group: Group, error: GroupError | None) -> None:
        for member in group.members.values():
            result = SyncResult(
                protocol_type=None if error else group.protocol_type,
                protocol_name=None if error else group.protocol_name,
                assignment=member.assignment,
                error=error,
            )
            if member.complete_sync(result):
                # Restart the session: an expiry that fired while it was parked was ignored.
                self.reschedule_heartbeat(group, member)

    def mark_stable(self, group: Group) -> None:
        group.transition_to(S.STABLE, self.clock.time_ms())
        group.completed_rebalances += 1
        if self._on_stable is not None:
            self._on_stable(group)

    # ---- members leaving ------------------------------------------------------------------
    def remove_member_and_update(self, group: Group, member: Member, reason: str) -> None:
        # A new member may still be parked in JoinGroup: answer it so a live client rejoins.
        member.complete_join(JoinResult.failed("", UnknownMemberIdError(member.member_id)))
        group.remove(member.member_id)
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self.complete_join(group)

    def remove_pending_member_and_update(self, group: Group, member_id: str) -> None:
        group.remove(member_id)
        if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self.complete_join(group)

    # ---- persistence ----------------------------------------------------------------------
    async def store(self, group: Group, assignment: Mapping[str, bytes]) -> None:
        await self._store.store_group(group.group_id, group.metadata_record(assignment))

    def store_in_background(self, group: Group, assignment: Mapping[str, bytes]) -> None:
        record = group.metadata_record(assignment)  # the state as of now, not when it runs
        task = asyncio.ensure_future(self._store.store_group(group.group_id, record))
        self._writes.add(task)
        task.add_done_callback(self._write_done)

    def _write_done(self, task: asyncio.Task[None]) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("event=group_store_failed error=%r", task.exception())

    async def drain(self) -> None:
        """Wait for background writes (tests, shutdown)."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)
