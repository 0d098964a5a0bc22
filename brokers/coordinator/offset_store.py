"""Committed offsets of groups: commit, fetch, delete and retention (Kafka's OffsetMetadataManager).

Owns: `OffsetStore` — the OffsetCommit checks (generation and member of group-managed commits;
simple `assign()` commits with generation -1 only while the group is Empty; REBALANCE_IN_PROGRESS
while CompletingRebalance; `offset.metadata.max.bytes`), writing commits before answering and
caching them only once written, TxnOffsetCommit (KIP-98/KIP-447: the same member checks, but
neither an active group nor a rebalance refuses a commit without member; one transactional batch
of the producer; the offsets stay pending per producer id until the transaction's marker, see
`OpenTransactions`), OffsetFetch (KIP-447 require_stable: plain commits being written and
pending transactional offsets are UNSTABLE_OFFSET_COMMIT), OffsetDelete (refused for topics the
group subscribes to; a tombstone also drops pending transactional offsets) and the periodic
KIP-211 expiry that also retires Empty groups left without offsets or open transactions. Group
lookup and coordinator ownership are checked by the caller. Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
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
from brokers.coordinator.group_log import Entry, GroupLog, TxnProducer, group_entry, offset_entry
from brokers.coordinator.group_records import NO_LEADER_EPOCH, OffsetAndMetadata
from brokers.coordinator.offsets import UNKNOWN_RECORD_OFFSET, LoggedOffset
from brokers.coordinator.open_transactions import OpenTransactions
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
class TxnCommitRequest:
    """TxnOffsetCommit: `offsets` keep their offset, leader epoch and metadata; the commit time
    is the coordinator's clock (as Kafka) and they never carry an explicit expiry."""

    transactional_id: str
    group_id: str
    producer: TxnProducer
    member_id: str
    generation_id: int
    group_instance_id: str | None
    offsets: Mapping[TopicPartition, OffsetAndMetadata]


TxnCommitResults = dict[TopicPartition, GroupError | None]


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    value: OffsetAndMetadata | None
    error: GroupError | None = None


class OffsetStore:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        log: GroupLog,
        rebalancer: Rebalancer,
        transactions: OpenTransactions,
    ) -> None:
        self._config = config
        self._clock = clock
        self._log = log
        self._rebalancer = rebalancer
        self._transactions = transactions

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
            if self._metadata_too_large(metadata):
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
            first = await self._log.append(group.group_id, entries)
        except GroupError as exc:
            return exc
        finally:
            group.offsets.end_commit(accepted)
        for index, (tp, value) in enumerate(accepted.items()):
            group.offsets.put(tp, value, first + index)
        return None

    def _metadata_too_large(self, metadata: str) -> bool:
        return len(metadata) > self._config.offset_metadata_max_bytes

    # ---- TxnOffsetCommit ------------------------------------------------------------------
    async def commit_transactional(
        self, group: Group, request: TxnCommitRequest
    ) -> TxnCommitResults:
        """Validate, write one transactional batch, keep the offsets pending for the marker."""
        error = self._validate_txn_commit(group, request)
        if error is not None:
            return dict.fromkeys(request.offsets, error)
        now = self._clock.time_ms()
        results: TxnCommitResults = {}
        staged: dict[TopicPartition, LoggedOffset] = {}
        for tp, offset in request.offsets.items():
            metadata = offset.metadata or ""
            if self._metadata_too_large(metadata):
                results[tp] = OffsetMetadataTooLargeError(tp[0])
                continue
            results[tp] = None
            value = OffsetAndMetadata(offset.offset, offset.leader_epoch, metadata, now)
            staged[tp] = LoggedOffset(value, UNKNOWN_RECORD_OFFSET)
        failure = await self._write_txn(group, request.producer, staged)
        if failure is None:
            return results
        return {tp: e if e is not None else failure for tp, e in results.items()}

    def _validate_txn_commit(self, group: Group, request: TxnCommitRequest) -> GroupError | None:
        """Kafka's ClassicGroup.validateOffsetCommit for transactional commits (KIP-447)."""
        if group.is_in(S.DEAD):
            return CoordinatorNotAvailableError(group.group_id)
        if request.generation_id < 0 and group.is_in(S.EMPTY):
            return None
        if request.generation_id >= 0 or request.member_id or request.group_instance_id is not None:
            error = group.validate_member(request.member_id, request.group_instance_id)
            if error is not None:
                return error
            if request.generation_id != group.generation_id:
                return IllegalGenerationError(group.group_id)
        # Without a member (TxnOffsetCommit v0–2 carry none) any group state is accepted, and
        # a rebalance in progress does not refuse it either: the group state is not enforced.
        return None

    async def _write_txn(
        self, group: Group, producer: TxnProducer, staged: dict[TopicPartition, LoggedOffset]
    ) -> GroupError | None:
        if not staged:
            return None
        group_id = group.group_id
        entries = [offset_entry(group_id, tp, logged.value) for tp, logged in staged.items()]
        # Staged before the append (in the same step of the event loop), so a marker that
        # follows this batch in the log finds the offsets whenever it completes.
        replaced = group.offsets.stage_txn(producer.producer_id, staged)
        self._transactions.add(self._log.partition_for(group_id), producer.producer_id, group_id)
        try:
            first = await self._log.append(group_id, entries, producer=producer)
        except GroupError as exc:
            group.offsets.unstage_txn(producer.producer_id, staged, replaced)
            return exc
        record_offsets = {tp: first + index for index, tp in enumerate(staged)}
        group.offsets.txn_written(producer.producer_id, staged, record_offsets)
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
        if group is None:
            if topics is None:
                return []
            return [FetchedOffset(t, p, None) for t, ps in topics for p in ps]
        if topics is None:  # every committed offset (pending-only partitions are not listed)
            wanted = [tp for tp, _ in group.offsets.items()]
        else:
            wanted = [(t, p) for t, ps in topics for p in ps]
        fetched = []
        for tp in wanted:
            if require_stable and group.offsets.is_pending(tp):
                fetched.append(FetchedOffset(tp[0], tp[1], None, UnstableOffsetCommitError()))
            else:
                fetched.append(FetchedOffset(tp[0], tp[1], group.offsets.get(tp)))
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
        in_transactions = group.offsets.txn_partitions()
        for topic, partitions in topics:
            subscribed = group.is_subscribed_to_topic(topic)
            for partition in partitions:
                if subscribed:
                    results.append((topic, partition, GroupSubscribedToTopicError(topic)))
                    continue
                results.append((topic, partition, None))
                tp = (topic, partition)
                if group.offsets.get(tp) is not None or tp in in_transactions:
                    doomed.append(tp)  # the tombstone drops pending transactional offsets too
        await self._log.append(
            group.group_id, [offset_entry(group.group_id, tp, None) for tp in doomed]
        )
        for tp in doomed:
            group.offsets.remove(tp)
        return results

    # ---- deleted partitions (Kafka's onPartitionsDeleted) -----------------------------------
    @staticmethod
    def held_of(
        group: Group, deleted: Set[TopicPartition], topics: Set[str] | None = None
    ) -> list[TopicPartition]:
        """Which of `deleted` `group` has offsets of (committed or pending transactional): looked
        up per deleted partition, since a group may hold many offsets; `topics` (the deleted
        partitions' topics) first, so a group with nothing of them costs a look-up per topic,
        not per partition (every broker asks every group it coordinates at each deletion)."""
        offsets = group.offsets
        transactional = bool(offsets.open_transactions())
        if topics is not None and not transactional and not any(map(offsets.holds_topic, topics)):
            return []
        pending = offsets.txn_partitions() if transactional else frozenset()
        return sorted(tp for tp in deleted if offsets.get(tp) is not None or tp in pending)

    async def forget_partitions(self, group: Group, doomed: Sequence[TopicPartition]) -> int:
        """Tombstone `group`'s offsets of `doomed` (`held_of`: partitions that were deleted);
        how many."""
        if not doomed:
            return 0
        await self._log.append(
            group.group_id, [offset_entry(group.group_id, tp, None) for tp in doomed]
        )
        for tp in doomed:
            group.offsets.remove(tp)
        return len(doomed)

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
