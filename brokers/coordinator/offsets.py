"""One group's committed offsets, and which of them are still being written.

Owns: `GroupOffsets` — committed `OffsetAndMetadata` per (topic, partition), the in-flight commits
(KIP-447's require_stable answers UNSTABLE_OFFSET_COMMIT for those), and the retention rule of
KIP-211: an offset expires `offsets.retention.minutes` after its base time (the group's Empty
timestamp or the commit time, chosen by the group), or at its explicit v1 expire timestamp.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from brokers.coordinator.group_records import OffsetAndMetadata

TopicPartition = tuple[str, int]
BaseTimestamp = Callable[[OffsetAndMetadata], int]


class GroupOffsets:
    def __init__(self) -> None:
        self._committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self._pending: Counter[TopicPartition] = Counter()

    def __len__(self) -> int:
        return len(self._committed)

    def get(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self._committed.get(tp)

    def items(self) -> Iterator[tuple[TopicPartition, OffsetAndMetadata]]:
        return iter(list(self._committed.items()))

    def topics(self) -> set[str]:
        return {topic for topic, _ in self._committed}

    def put(self, tp: TopicPartition, value: OffsetAndMetadata) -> None:
        self._committed[tp] = value

    def remove(self, tp: TopicPartition) -> bool:
        return self._committed.pop(tp, None) is not None

    def begin_commit(self, tps: Iterable[TopicPartition]) -> None:
        self._pending.update(tuple(tps))  # a tuple, never a mapping: Counter would add its values

    def end_commit(self, tps: Iterable[TopicPartition]) -> None:
        self._pending.subtract(tuple(tps))
        self._pending = +self._pending  # drop zero counts

    def is_pending(self, tp: TopicPartition) -> bool:
        return self._pending[tp] > 0

    def has_pending(self) -> bool:
        return bool(self._pending)

    def expired(
        self,
        now_ms: int,
        retention_ms: int,
        base: BaseTimestamp,
        keep_topic: Callable[[str], bool],
    ) -> list[TopicPartition]:
        """Offsets past retention, skipping kept (subscribed) topics and in-flight commits."""
        expired = []
        for tp, value in self._committed.items():
            if keep_topic(tp[0]) or self.is_pending(tp):
                continue
            if value.expire_timestamp_ms is not None:
                if now_ms >= value.expire_timestamp_ms:
                    expired.append(tp)
            elif now_ms - base(value) >= retention_ms:
                expired.append(tp)
        return expired
