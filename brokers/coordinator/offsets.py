"""One group's committed offsets, the commits still being written, and its pending transactional
offsets.

Owns: `GroupOffsets` — committed `OffsetAndMetadata` per (topic, partition) with the log offset of
the record that stored each (`LoggedOffset`), the in-flight commits (KIP-447's require_stable
answers UNSTABLE_OFFSET_COMMIT for those), the transactional offsets of open transactions per
producer id (KIP-98: pending until the transaction's marker, then committed or dropped), and the
retention rule of KIP-211: an offset expires `offsets.retention.minutes` after its base time (the
group's Empty timestamp or the commit time, chosen by the group), or at its explicit v1 expire
timestamp.

Ordering (Kafka's OffsetMetadataManager.replayEndTransactionMarker): the log decides. An offset
replaces the committed one only if its record is later in `__consumer_offsets`; so a transaction's
offsets, committed by its marker, win over older plain commits, but a plain commit appended after
the transaction's batch (and before its marker) keeps its place. A tombstone removes the committed
offset and the pending transactional ones of that partition. Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from brokers.coordinator.group_records import OffsetAndMetadata

TopicPartition = tuple[str, int]
BaseTimestamp = Callable[[OffsetAndMetadata], int]
UNKNOWN_RECORD_OFFSET = -1  # a transactional commit whose batch is not appended yet


@dataclass(frozen=True, slots=True)
class LoggedOffset:
    """An offset as stored: its value and the log offset of its `__consumer_offsets` record."""

    value: OffsetAndMetadata
    record_offset: int

    def older_than(self, other: LoggedOffset) -> bool:
        # A commit still being appended sorts last: its record will follow every one written.
        if self.record_offset == UNKNOWN_RECORD_OFFSET:
            return False
        return self.record_offset < other.record_offset


class GroupOffsets:
    def __init__(self) -> None:
        self._committed: dict[TopicPartition, LoggedOffset] = {}
        self._topics: Counter[str] = Counter()  # committed partitions per topic
        self._pending: Counter[TopicPartition] = Counter()
        self._txn: dict[int, dict[TopicPartition, LoggedOffset]] = {}  # producer id → pending

    def __len__(self) -> int:
        return len(self._committed)

    def get(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        logged = self._committed.get(tp)
        return None if logged is None else logged.value

    def items(self) -> Iterator[tuple[TopicPartition, OffsetAndMetadata]]:
        return iter([(tp, logged.value) for tp, logged in self._committed.items()])

    def topics(self) -> set[str]:
        return set(self._topics)

    def holds_topic(self, topic: str) -> bool:
        """Whether an offset of `topic` is committed here (a dict look-up, not a walk)."""
        return topic in self._topics

    def put(self, tp: TopicPartition, value: OffsetAndMetadata, record_offset: int) -> bool:
        """Store a written commit unless a later record already set this partition."""
        return self._materialise(tp, LoggedOffset(value, record_offset))

    def _materialise(self, tp: TopicPartition, logged: LoggedOffset) -> bool:
        current = self._committed.get(tp)
        if current is not None and logged.older_than(current):
            return False
        if current is None:
            self._topics[tp[0]] += 1
        self._committed[tp] = logged
        return True

    def remove(self, tp: TopicPartition) -> bool:
        """A tombstone: the committed offset and every pending transactional one go."""
        for producer_id in list(self._txn):
            self._drop_txn_offset(producer_id, tp)
        if self._committed.pop(tp, None) is None:
            return False
        left = self._topics[tp[0]] - 1
        if left:
            self._topics[tp[0]] = left
        else:
            del self._topics[tp[0]]
        return True

    # ---- plain commits in flight (require_stable) -----------------------------------------
    def begin_commit(self, tps: Iterable[TopicPartition]) -> None:
        self._pending.update(tuple(tps))  # a tuple, never a mapping: Counter would add its values

    def end_commit(self, tps: Iterable[TopicPartition]) -> None:
        pending = self._pending
        for tp in tps:  # each counted by its `begin_commit`; a count that reaches zero goes
            left = pending[tp] - 1
            if left > 0:
                pending[tp] = left
            else:
                pending.pop(tp, None)

    def is_pending(self, tp: TopicPartition) -> bool:
        """A plain commit being written, or a transactional offset awaiting its marker."""
        if self._pending[tp] > 0:
            return True
        return any(tp in offsets for offsets in self._txn.values())

    def has_pending(self) -> bool:
        return bool(self._pending) or bool(self._txn)

    # ---- transactional offsets (KIP-98) ---------------------------------------------------
    def stage_txn(
        self, producer_id: int, offsets: Mapping[TopicPartition, LoggedOffset]
    ) -> dict[TopicPartition, LoggedOffset]:
        """Offsets of `producer_id`'s open transaction: pending until `complete_txn`. Returns
        the pending ones they replace (for `unstage_txn`)."""
        staged = self._txn.setdefault(producer_id, {})
        replaced = {tp: staged[tp] for tp in offsets if tp in staged}
        staged.update(offsets)
        return replaced

    def txn_written(
        self,
        producer_id: int,
        offsets: Mapping[TopicPartition, LoggedOffset],
        record_offsets: Mapping[TopicPartition, int],
    ) -> None:
        """The staged `offsets` were appended: note where their records are (unless a later
        commit of the same transaction replaced them meanwhile)."""
        staged = self._txn.get(producer_id, {})
        for tp, logged in offsets.items():
            if staged.get(tp) is logged:
                staged[tp] = LoggedOffset(logged.value, record_offsets[tp])

    def unstage_txn(
        self,
        producer_id: int,
        offsets: Mapping[TopicPartition, LoggedOffset],
        replaced: Mapping[TopicPartition, LoggedOffset],
    ) -> None:
        """The write failed: the offsets it staged give way to those they replaced (a fenced
        commit must not undo the transaction's earlier ones); a later commit's stay."""
        staged = self._txn.get(producer_id, {})
        for tp, logged in offsets.items():
            if staged.get(tp) is not logged:
                continue
            if tp in replaced:
                staged[tp] = replaced[tp]
            else:
                self._drop_txn_offset(producer_id, tp)

    def _drop_txn_offset(self, producer_id: int, tp: TopicPartition) -> None:
        staged = self._txn.get(producer_id)
        if staged is not None and staged.pop(tp, None) is not None and not staged:
            del self._txn[producer_id]

    def complete_txn(self, producer_id: int, commit: bool) -> int:
        """The transaction's marker: commit materialises its offsets (log order decides against
        plain commits), abort drops them. Returns how many offsets were materialised."""
        staged = self._txn.pop(producer_id, None)
        if staged is None or not commit:
            return 0
        return sum(self._materialise(tp, logged) for tp, logged in staged.items())

    def open_transactions(self) -> set[int]:
        return set(self._txn)

    def txn_partitions(self) -> set[TopicPartition]:
        return {tp for offsets in self._txn.values() for tp in offsets}

    # ---- retention (KIP-211) --------------------------------------------------------------
    def expired(
        self,
        now_ms: int,
        retention_ms: int,
        base: BaseTimestamp,
        keep_topic: Callable[[str], bool],
    ) -> list[TopicPartition]:
        """Offsets past retention, skipping kept (subscribed) topics and pending commits."""
        expired = []
        for tp, logged in self._committed.items():
            if keep_topic(tp[0]) or self.is_pending(tp):
                continue
            value = logged.value
            if value.expire_timestamp_ms is not None:
                if now_ms >= value.expire_timestamp_ms:
                    expired.append(tp)
            elif now_ms - base(value) >= retention_ms:
                expired.append(tp)
        return expired
