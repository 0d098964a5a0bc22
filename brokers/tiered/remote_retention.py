"""Which remote segments a leader deletes (Kafka's RLMExpirationTask rules).

Owns: `expired_segments` over the finished segments in offset order, the union of three prefixes
(like brokers/log/retention.py for local segments): segments wholly below the log start
(DeleteRecords), older than `retention.ms` by their largest timestamp, and the oldest ones while
the partition's total size (remote segments plus the local segments not yet copied, Kafka's
onlyLocalLogSegmentsSize) stays at or above `retention.bytes` without them. Plus `dangling`: segments
whose copy started but never finished (the copier died or failed) or whose delete did not finish,
which are deleted (again) whenever the leader expires. Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokers.log.config import LogConfig
from brokers.tiered.metadata_manager import PartitionTier
from brokers.tiered.segment_metadata import RemoteSegment, SegmentState


def expired_segments(
    finished: Sequence[RemoteSegment], *, config: LogConfig, now_ms: int, log_start_offset: int,
    local_only_bytes: int,
) -> list[RemoteSegment]:  # fmt: skip
    count = 0
    while count < len(finished) and finished[count].end_offset < log_start_offset:
        count += 1
    if config.retention_ms >= 0:
        by_time = 0
        while (
            by_time < len(finished)
            and now_ms - finished[by_time].max_timestamp > config.retention_ms
        ):
            by_time += 1
        count = max(count, by_time)
    if config.retention_bytes >= 0:
        excess = sum(s.size_bytes for s in finished) + local_only_bytes - config.retention_bytes
        by_size = 0
        while by_size < len(finished) and excess - finished[by_size].size_bytes >= 0:
            excess -= finished[by_size].size_bytes
            by_size += 1
        count = max(count, by_size)
    return list(finished[:count])


def dangling(tier: PartitionTier) -> list[RemoteSegment]:
    """Copies that never finished and deletes that never finished: deleted (again)."""
    return tier.in_state(SegmentState.COPY_SEGMENT_STARTED) + tier.in_state(
        SegmentState.DELETE_SEGMENT_STARTED
    )
