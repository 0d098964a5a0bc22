"""Which compacted logs need cleaning, and from where (Kafka's LogCleanerManager, one log dir).

Owns: the log dir's `cleaner-offset-checkpoint` (the first dirty offset per partition, Kafka's
checkpoint format through `checkpoints`), the set of partitions marked uncleanable after an
unexpected error (until the partition is deleted or the broker restarts, as Kafka), and the choice:
- cleanable range (Kafka's cleanableOffsets): first dirty = the checkpoint, reset to the log start
  when it is below the log start or past the log end; first uncleanable = the lowest of the upper
  bound the caller passes (the high watermark), the log's first unstable offset (the first offset
  of a transaction still open or whose marker is not yet replicated; without replication, no
  high watermark, of one still open: Kafka cleans up to the last stable offset, so the cleaner
  only meets transactions whose outcome is in the log), the active segment's base offset and, with
  min.compaction.lag.ms > 0, the first dirty non-active segment whose largest timestamp is newer
  than now - lag;
- dirty ratio = cleanable bytes / (clean + cleanable bytes), in whole segments as Kafka counts them:
  clean = segments starting below the first dirty offset, cleanable = segments from the one holding
  the first dirty offset up to the one holding the first uncleanable offset;
- max.compaction.lag.ms: a log whose earliest dirty non-active segment's first batch timestamp is
  older than now - lag must be cleaned even below min.cleanable.dirty.ratio;
- the filthiest eligible log: compacted, open, not uncleanable, not empty, and either forced by the
  lag with cleanable bytes or with a ratio above min.cleanable.dirty.ratio; highest ratio first.
Plain attributes `max_dirty_ratio`, `max_compaction_delay_ms`, `cleanable_partitions` describe the
last selection (Kafka's max-dirty-percent, max-compaction-delay-secs). A corrupt checkpoint is
logged and ignored: every log is then dirty from its start, which is slow but safe.

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from brokers.log.checkpoints import CLEANER_OFFSET_CHECKPOINT, read_offsets, write_offsets
from brokers.log.errors import CorruptCheckpointError
from brokers.log.log import Log
from brokers.log.segment import LogSegment

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class LogToClean:
    log: Log
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    compaction_delay_ms: int  # > 0: max.compaction.lag.ms forces a clean
    checkpoint_reset: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def needs_compaction_now(self) -> bool:
        return self.compaction_delay_ms > 0

    @property
    def eligible(self) -> bool:
        forced = self.needs_compaction_now and self.cleanable_bytes > 0
        return forced or self.cleanable_ratio > self.log.config.min_cleanable_dirty_ratio


class CleanerManager:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / CLEANER_OFFSET_CHECKPOINT
        self.max_dirty_ratio = 0.0
        self.max_compaction_delay_ms = 0
        self.cleanable_partitions = 0
        self._offsets: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()

    def load(self) -> None:
        try:
            self._offsets = read_offsets(self.path)
        except CorruptCheckpointError as exc:
            log.warning("ignoring %s: %s", self.path.name, exc)
            self._offsets = {}

    # -- state ------------------------------------------------------------------------------

    def first_dirty_checkpoint(self, partition: TopicPartition) -> int | None:
        return self._offsets.get(partition)

    @property
    def uncleanable(self) -> frozenset[TopicPartition]:
        return frozenset(self._uncleanable)

    def mark_uncleanable(self, partition: TopicPartition) -> None:
        self._uncleanable.add(partition)

    def done_cleaning(self, partition: TopicPartition, end_offset: int) -> None:
        """The round cleaned everything below `end_offset`: it is the next first dirty offset."""
        self._offsets[partition] = end_offset
        self._write()

    def forget(self, partition: TopicPartition) -> None:
        """The partition was deleted: drop its checkpoint and uncleanable mark."""
        self._uncleanable.discard(partition)
        if self._offsets.pop(partition, None) is not None:
            self._write()

    def truncate_checkpoint(self, partition: TopicPartition, offset: int) -> None:
        """Kafka's maybeTruncateCheckpoint: the log was truncated to `offset`."""
        if self._offsets.get(partition, 0) > offset:
            self._offsets[partition] = offset
            self._write()

    def _write(self) -> None:
        write_offsets(self.path, self._offsets)

    # -- choosing ---------------------------------------------------------------------------

    def grab_filthiest(
        self, logs: Iterable[Log], now_ms: int, upper_bound: Callable[[Log], int],
        exclude: frozenset[TopicPartition] = frozenset(),
    ) -> LogToClean | None:  # fmt: skip
        candidates: list[LogToClean] = []
        for partition_log in logs:
            key = (partition_log.topic, partition_log.partition)
            if not partition_log.config.compact or partition_log.closed:
                continue
            if key in exclude or key in self._uncleanable:
                continue
            target = self.log_to_clean(partition_log, now_ms, upper_bound(partition_log))
            if target.checkpoint_reset:
                self.done_cleaning(key, target.first_dirty)
            if target.total_bytes > 0:
                candidates.append(target)
        eligible = [target for target in candidates if target.eligible]
        self.max_dirty_ratio = max((t.cleanable_ratio for t in candidates), default=0.0)
        self.max_compaction_delay_ms = max((t.compaction_delay_ms for t in candidates), default=0)
        self.cleanable_partitions = len(eligible)
        return max(eligible, key=lambda target: target.cleanable_ratio, default=None)

    def log_to_clean(self, partition_log: Log, now_ms: int, upper_bound_offset: int) -> LogToClean:
        segments = partition_log.segments
        first_dirty, reset = self._first_dirty(partition_log)
        candidates = [upper_bound_offset, partition_log.active_segment.base_offset]
        unstable = _first_unstable_offset(partition_log)
        if unstable is not None:
            candidates.append(unstable)
        lag = partition_log.config.min_compaction_lag_ms
        if lag > 0:
            young = [
                s
                for s in _non_active_from(segments, first_dirty)
                if s.largest_timestamp > now_ms - lag
            ]
            candidates.extend(s.base_offset for s in young[:1])
        first_uncleanable = max(first_dirty, min(candidates))
        return LogToClean(
            partition_log, first_dirty, first_uncleanable,
            sum(s.size for s in segments if s.base_offset < first_dirty),
            _cleanable_bytes(segments, first_dirty, first_uncleanable),
            _compaction_delay_ms(partition_log, segments, first_dirty, now_ms), reset,
        )  # fmt: skip

    def _first_dirty(self, partition_log: Log) -> tuple[int, bool]:
        start = partition_log.log_start_offset
        checkpoint = self._offsets.get((partition_log.topic, partition_log.partition))
        if checkpoint is None:
            return start, False
        if checkpoint < start or checkpoint > partition_log.log_end_offset:
            if not (checkpoint < start and partition_log.config.delete):
                log.warning(
                    "%s: resetting the first dirty offset %d to the log start %d",
                    partition_log.directory.name, checkpoint, start,
                )  # fmt: skip
            return start, True
        return checkpoint, False


def _first_unstable_offset(partition_log: Log) -> int | None:
    if partition_log.high_watermark is None:  # no replication: a written marker is stable
        return min(partition_log.ongoing_transactions().values(), default=None)
    return partition_log.first_unstable_offset()


def _floor_index(segments: Sequence[LogSegment], offset: int) -> int:
    return max(bisect_right([s.base_offset for s in segments], offset) - 1, 0)


def _non_active_from(segments: Sequence[LogSegment], offset: int) -> Sequence[LogSegment]:
    """Kafka's nonActiveLogSegmentsFrom: from the segment holding `offset`, the active excluded."""
    if offset > segments[-1].base_offset:
        return ()
    return segments[_floor_index(segments, offset) : -1]


def _cleanable_bytes(segments: Sequence[LogSegment], first_dirty: int, uncleanable: int) -> int:
    """Kafka's calculateCleanableBytes: whole segments up to the one holding `uncleanable`."""
    holding = _non_active_from(segments, uncleanable)
    limit = holding[0].base_offset if holding else segments[-1].base_offset
    start = _floor_index(segments, min(first_dirty, limit))
    return sum(s.size for s in segments[start:] if s.base_offset < limit)


def _compaction_delay_ms(
    partition_log: Log, segments: Sequence[LogSegment], first_dirty: int, now_ms: int
) -> int:
    """Kafka's maxCompactionDelay: how far past max.compaction.lag.ms the oldest dirty data is."""
    clean_until = now_ms - max(partition_log.config.max_compaction_lag_ms, 0)
    if clean_until <= 0:  # the default lag (Long.MAX_VALUE) never forces: skip reading headers
        return 0
    timestamps = [_first_batch_timestamp(s) for s in _non_active_from(segments, first_dirty)]
    earliest = min((t for t in timestamps if t > 0), default=None)
    return clean_until - earliest if earliest is not None and earliest < clean_until else 0


def _first_batch_timestamp(segment: LogSegment) -> int:
    for _, header in segment.records.headers(0):
        return header.max_timestamp
    return -1
