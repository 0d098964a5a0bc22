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
With `remote.storage.enable` (KIP-405) the two retention passes use `local.retention.ms` /
`local.retention.bytes` (-2: the total ones) and never take a segment not wholly below
`copied_upto` (the offset after the last one copied to the remote tier; None: nothing copied), so
local data goes only once the remote tier has it (unless `remote.log.copy.disable`: then nothing
is copied any more and local retention, equal to the total one, decides alone, as Kafka's
remoteLogEnabledAndRemoteCopyEnabled). The log-start pass is not bounded: those records
were deleted by the user.
Every pass stops at the first segment it keeps and never takes a segment holding offsets at or
above the high watermark (data not yet replicated everywhere must not vanish before followers fetch
it). As in Kafka's deletableSegments, the active (last) segment is a candidate too once it has data
and the high watermark has reached the log end: a quiet topic's expired data must go, so the count
may be every segment, and the caller then rolls a new empty active segment before deleting (a log
always keeps one). Only the time pass can take the active segment in practice: the log-start pass
needs a successor, and the size pass takes it only with retention.bytes = 0 (as Kafka's arithmetic
does).

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
    log_start_offset: int, log_end_offset: int, high_watermark: int | None, by_retention: bool,
    copied_upto: int | None = None,
) -> int:  # fmt: skip
    """How many of the oldest `segments` to delete (0 .. len; len means the active one too)."""
    candidates = _candidates(segments, log_end_offset, high_watermark)
    counts = [_prefix(
        candidates,
        lambda i: i + 1 < len(segments) and segments[i + 1].base_offset <= log_start_offset,
    )]  # fmt: skip
    retention_ms, retention_bytes = config.retention_ms, config.retention_bytes
    retained = candidates
    if config.remote_storage_enable:
        retention_ms = config.local_retention_ms_effective
        retention_bytes = config.local_retention_bytes_effective
        if not config.remote_log_copy_disable:  # copying stopped: nothing more to wait for
            retained = min(candidates, _copied(segments, log_end_offset, copied_upto))
    if by_retention and retention_ms >= 0:
        counts.append(_prefix(
            retained, lambda i: now_ms - segments[i].largest_timestamp > retention_ms,
        ))  # fmt: skip
    if by_retention and retention_bytes >= 0:
        counts.append(_size_prefix(segments, retained, retention_bytes))
    return max(counts)


def _copied(
    segments: Sequence[RetainedSegment], log_end_offset: int, copied_upto: int | None
) -> int:
    """Leading segments wholly below `copied_upto` (in the remote tier)."""
    if copied_upto is None:
        return 0
    count = 0
    for index in range(len(segments)):
        upper = log_end_offset if index + 1 == len(segments) else segments[index + 1].base_offset
        if upper > copied_upto:
            break
        count += 1
    return count


def _candidates(
    segments: Sequence[RetainedSegment], log_end_offset: int, high_watermark: int | None
) -> int:
    """Leading segments whose data all lies below the high watermark (the log end when None);
    a last segment that is empty is never one (Kafka's isLastSegmentAndEmpty)."""
    limit = log_end_offset if high_watermark is None else high_watermark
    count = 0
    for index, segment in enumerate(segments):
        last = index + 1 == len(segments)
        upper = log_end_offset if last else segments[index + 1].base_offset
        if upper > limit or (last and segment.size == 0):
            break
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
