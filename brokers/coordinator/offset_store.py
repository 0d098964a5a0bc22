"""Committed offsets of groups: commit, fetch, delete and retention (Kafka's OffsetMetadataManager).

Owns: `OffsetStore` — the OffsetCommit checks (generation and member of group-managed commits;
simple `assign()` commits with generation -1 only while the group is Empty; REBALANCE_IN_PROGRESS
while CompletingRebalance; `offset.metadata.max.bytes`), writing commits before answering and
caching them only once written, OffsetFetch (KIP-447 require_stable), OffsetDelete (refused for
topics the group subscribes to) and the periodic KIP-211 expiry that also retires Empty groups
left without offsets. Group lookup and coordinator ownership are checked by the caller.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from brokers.common.clock import Clock
from brokers.coordinator.config import GroupConfig
from brokers.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from brokers.coordinator.errors import (
    CoordinatorNotAvailableError,
    GroupError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnstableOffsetCommitError,
)
from brokers.coordinator.group import Group, GroupState
from brokers.coordinator.group_log import Entry, GroupLog, group_entry, offset_entry
from brokers.coordinator.group_records import NO_LEADER_EPOCH, OffsetAndMetadata
from brokers.coordinator.rebalance import Rebalancer

S = GroupState
TopicPartition = tuple[str, int]
RETENTION_DEFAULT = -1  # OffsetCommit v2–v4 retention_time_ms: use the broker's retention


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    offsets: Sequence[OffsetCommit]
    retention_ms: int = RETENTION_DEFAULT


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    value: OffsetAndMetadata | None
    error: GroupError | None = None


class OffsetStore:
    def __init__(
        self, config: GroupConfig, clock: Clock, log: GroupLog, rebalancer: Rebalancer
    ) -> None:
        self._config = config
        self._clock = clock
        self._log = log
        self._rebalancer = rebalancer

    # ---- OffsetCommit ---------------------------------------------------------------------
    async def commit(
        self, group: Group, request: CommitRequest
    ) -> list[tuple[OffsetCommit, GroupError | None]]:
        error = self._validate_commit(group, request)
        if error is not None:
            return [(c, error) for c in request.offsets]
        member = group.members.get(request.member_id)
        if member is not None and group.is_in(S.STABLE, S.PREPARING_REBALANCE):
            self._rebalancer.reschedule_heartbeat(group, member)  # a commit keeps the session
        now = self._clock.time_ms()
        expire = None if request.retention_ms < 0 else now + request.retention_ms
        results: list[tuple[OffsetCommit, GroupError | None]] = []
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        for commit in request.offsets:
            metadata = commit.metadata or ""
            if len(metadata) > self._config.offset_metadata_max_bytes:
                results.append((commit, OffsetMetadataTooLargeError(commit.topic)))
                continue
            results.append((commit, None))
            value = OffsetAndMetadata(commit.offset, commit.leader_epoch, metadata, now, expire)
            accepted[(commit.topic, commit.partition)] = value
        failure = await self._write(group, accepted)
        if failure is None:
            return results
        return [(c, e if e is not None else failure) for c, e in results]

    def _validate_commit(self, group: Group, request: CommitRequest) -> GroupError | None:
        if group.is_in(S.DEAD):
            return CoordinatorNotAvailableError(group.group_id)
        if request.generation_id < 0 and group.is_in(S.EMPTY):
            return None  # a simple consumer (or the admin client) storing offsets only
        if request.generation_id >= 0 or request.member_id or request.group_instance_id:
            error = group.validate_member(request.member_id, request.group_instance_id)
            if error is not None:
                return error
            if request.generation_id != group.generation_id:
                return IllegalGenerationError(group.group_id)
        elif not group.is_in(S.EMPTY):
            return UnknownMemberIdError(request.member_id)
        if group.is_in(S.COMPLETING_REBALANCE):
            # It has the new generation from JoinGroup but not its assignment yet.
            return RebalanceInProgressError(group.group_id)
        return None

    async def _write(
        self, group: Group, accepted: dict[TopicPartition, OffsetAndMetadata]
    ) -> GroupError | None:
        if not accepted:
            return None
        entries = [offset_entry(group.group_id, tp, v) for tp, v in accepted.items()]
        group.offsets.begin_commit(accepted)
        try:
            await self._log.append(group.group_id, entries)
        except GroupError as exc:
            return exc
        finally:
            group.offsets.end_commit(accepted)
        for tp, value in accepted.items():
            group.offsets.put(tp, value)
        return None

    # ---- OffsetFetch ----------------------------------------------------------------------
    def fetch(
        self,
        group: Group | None,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        *,
        require_stable: bool,
    ) -> list[FetchedOffset]:
        """`topics` None: every committed offset of the group."""
        if group is not None and group.is_in(S.DEAD):
            group = None
        if topics is None:
            if group is None:
                return []
            return [FetchedOffset(t, p, v) for (t, p), v in group.offsets.items()]
        fetched = []
        for topic, partitions in topics:
            for partition in partitions:
                tp = (topic, partition)
                if group is not None and require_stable and group.offsets.is_pending(tp):
                    fetched.append(
                        FetchedOffset(topic, partition, None, UnstableOffsetCommitError())
                    )
                    continue
                value = None if group is None else group.offsets.get(tp)
                fetched.append(FetchedOffset(topic, partition, value))
        return fetched

    # ---- OffsetDelete ---------------------------------------------------------------------
    async def delete(
        self, group: Group, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> list[tuple[str, int, GroupError | None]]:
        """Per-partition results; raises the group-level error (not found, non-empty)."""
        if group.is_in(S.DEAD):
            raise GroupIdNotFoundError(group.group_id)
        active = group.is_in(S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE)
        if active and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise NonEmptyGroupError(group.group_id)
        results: list[tuple[str, int, GroupError | None]] = []
        doomed: list[TopicPartition] = []
        for topic, partitions in topics:
            subscribed = group.is_subscribed_to_topic(topic)
            for partition in partitions:
                if subscribed:
                    results.append((topic, partition, GroupSubscribedToTopicError(topic)))
                    continue
                results.append((topic, partition, None))
                if group.offsets.get((topic, partition)) is not None:
                    doomed.append((topic, partition))
        await self._log.append(
            group.group_id, [offset_entry(group.group_id, tp, None) for tp in doomed]
        )
        for tp in doomed:
            group.offsets.remove(tp)
        return results

    # ---- retention (KIP-211) --------------------------------------------------------------
    def expire(self, group: Group) -> tuple[list[Entry], bool]:
        """Tombstones for `group`'s expired offsets, and whether the group itself should go.

        The expired offsets leave the cache at once; the caller appends the tombstones.
        """
        entries: list[Entry] = []
        if len(group.offsets) > 0:
            base = group.offset_expiration_base()
            if base is None:
                return [], False
            now = self._clock.time_ms()
            retention = self._config.offsets_retention_ms
            expired = group.offsets.expired(now, retention, base, group.is_subscribed_to_topic)
            entries = [offset_entry(group.group_id, tp, None) for tp in expired]
            for tp in expired:
                group.offsets.remove(tp)
        if len(group.offsets) == 0 and not group.offsets.has_pending() and group.is_in(S.EMPTY):
            entries.append(group_entry(group.group_id, None))
            return entries, True
        return entries, False
