"""Which old segments a partition may delete (Kafka's UnifiedLog.deleteOldSegments rules).

Owns: the retention decision, as the number of oldest segments to delete. Kafka runs three passes,
each deleting a prefix of the segment list; the union of prefixes is the longest one, so this
computes each and takes the maximum:
- log start (always, also for compacted topics): a segment whose successor starts at or below the
  log start offset holds nothing readable (DeleteRecords, KIP-107);
- `retention.ms` (cleanup.policy contains delete, value >= 0): now - the segment's largest
  timestamp > retention.ms;
- `retention.bytes` (same policy, value >= 0): drop oldest segments while the partition stays at or
  above retention.bytes without them.
Every pass stops at the first segment it keeps, never takes the active (last) segment (DESIGN.md:
whole segments, never the active one), and never takes a segment holding offsets at or above the
high watermark (data not yet replicated everywhere must not vanish before followers fetch it).

Pure function over segments; thread-safe as long as the segments are not mutated meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from brokers.log.config import LogConfig


class RetainedSegment(Protocol):
    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def largest_timestamp(self) -> int: ...


def deletable_segment_count(
    segments: Sequence[RetainedSegment], *, config: LogConfig, now_ms: int,
    log_start_offset: int, high_watermark: int | None, by_retention: bool,
) -> int:  # fmt: skip
    """How many of the oldest `segments` to delete (0 .. len - 1)."""
    candidates = len(segments) - 1  # never the active segment
    if high_watermark is not None:
        candidates = min(candidates, _segments_below(segments, high_watermark))
    counts = [_prefix(candidates, lambda i: segments[i + 1].base_offset <= log_start_offset)]
    if by_retention and config.retention_ms >= 0:
        counts.append(_prefix(
            candidates,
            lambda i: now_ms - segments[i].largest_timestamp > config.retention_ms,
        ))  # fmt: skip
    if by_retention and config.retention_bytes >= 0:
        counts.append(_size_prefix(segments, candidates, config.retention_bytes))
    return max(counts)


def _segments_below(segments: Sequence[RetainedSegment], offset: int) -> int:
    """Leading segments whose successor starts at or below `offset` (all their data is below)."""
    count = 0
    while count + 1 < len(segments) and segments[count + 1].base_offset <= offset:
        count += 1
    return count


def _prefix(limit: int, deletable: Callable[[int], bool]) -> int:
    count = 0
    while count < limit and deletable(count):
        count += 1
    return count


def _size_prefix(segments: Sequence[RetainedSegment], limit: int, retention_bytes: int) -> int:
    excess = sum(segment.size for segment in segments) - retention_bytes
    count = 0
    while count < limit and excess - segments[count].size >= 0:
        excess -= segments[count].size
        count += 1
    return count
