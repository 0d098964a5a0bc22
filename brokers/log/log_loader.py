"""Opening a partition directory: segments loaded, recovered if needed (Kafka's LogLoader).

Owns: the order of the steps that turn the files of `<log.dir>/<topic>-<partition>/` back into a
list of segments and the partition's offsets:
1. leftovers of a crash are cleaned up (recovery.remove_leftover_files);
2. every segment is opened; an index that is missing or fails its sanity check is rebuilt from the
   log even after a clean shutdown;
3. without a clean shutdown, every segment from the one holding the recovery point onwards is
   re-validated batch by batch; at the first bad batch that segment is truncated and all later
   segments are deleted (their data was never acknowledged as flushed), then the recovered
   segments are fsynced so the recovery point can move to the new log end;
4. a log start offset past the recovered end (data lost in a crash) restarts the log there.
Every segment recovered in 2 or 3 has an empty `.txnindex`: `LoadedLog.recovered` lists them,
and the partition log refills them from their ABORT markers while it replays producer state
(producer_replay), which needs the producer state at their start, as Kafka's recoverSegment.

Also `create_segment`, which applies the config (index sizes, roll jitter) to a new segment.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path

from brokers.common.clock import Clock
from brokers.log.config import LogConfig
from brokers.log.file_ops import OS_FILES, FileOps
from brokers.log.recovery import remove_leftover_files, segment_base_offsets
from brokers.log.segment import LogSegment

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    recovered: frozenset[int] = frozenset()  # base offsets of segments whose .txnindex is empty


def roll_jitter_ms(config: LogConfig) -> int:
    """Kafka's randomSegmentJitter: spreads rolls of many partitions created together."""
    if config.segment_jitter_ms <= 0:
        return 0
    return random.randrange(min(config.segment_jitter_ms, config.max_segment_ms))


def create_segment(
    directory: Path, base_offset: int, config: LogConfig, clock: Clock, files: FileOps = OS_FILES,
    *, make_indexes: bool = True,
) -> LogSegment:  # fmt: skip
    return LogSegment.create(
        directory, base_offset, clock=clock, index_interval_bytes=config.index_interval_bytes,
        max_index_bytes=config.segment_index_bytes, roll_jitter_ms=roll_jitter_ms(config),
        files=files, make_indexes=make_indexes,
    )  # fmt: skip


def load_log(
    directory: Path, config: LogConfig, *, clock: Clock, recovery_point: int,
    log_start_offset: int, had_clean_shutdown: bool, files: FileOps = OS_FILES,
) -> LoadedLog:  # fmt: skip
    remove_leftover_files(directory)
    segments: list[LogSegment] = []
    rebuilt: dict[int, int] = {}  # base offset -> bytes cut while rebuilding its indexes
    for base in segment_base_offsets(directory):
        segment, truncated = LogSegment.open(
            directory, base, clock=clock, index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes, roll_jitter_ms=roll_jitter_ms(config),
            files=files,
        )  # fmt: skip
        segments.append(segment)
        if truncated is not None:
            rebuilt[base] = truncated
            log.info("rebuilt the indexes of %s segment %d", directory.name, base)
    recovered = set(rebuilt)
    if not had_clean_shutdown and segments:
        recovered.update(_recover_unflushed(directory, segments, recovery_point, rebuilt))
    # A log's only segment, in a directory with no other segment file: its indexes are made
    # once it holds data (a new partition costs its directory and one file).
    if not segments:
        segments.append(
            create_segment(directory, log_start_offset, config, clock, files, make_indexes=False)
        )
    if log_start_offset > segments[-1].next_offset:
        log.warning("%s: log start %d is past the recovered end", directory.name, log_start_offset)
        for segment in segments:
            segment.delete_files()
        segments = [
            create_segment(directory, log_start_offset, config, clock, files, make_indexes=False)
        ]
    log_end_offset = segments[-1].next_offset
    if not had_clean_shutdown:
        recovery_point = log_end_offset  # everything below was just re-validated and fsynced
    return LoadedLog(
        segments,
        max(log_start_offset, segments[0].base_offset),
        log_end_offset,
        min(recovery_point, log_end_offset),
        frozenset(recovered & {segment.base_offset for segment in segments}),
    )


def _recover_unflushed(
    directory: Path, segments: list[LogSegment], recovery_point: int, rebuilt: dict[int, int]
) -> list[int]:
    """Recover the segments from the one holding the recovery point; returns their bases."""
    first = 0
    while first + 1 < len(segments) and segments[first + 1].base_offset <= recovery_point:
        first += 1
    recovered = []
    for index in range(first, len(segments)):
        segment = segments[index]
        recovered.append(segment.base_offset)
        truncated = rebuilt.get(segment.base_offset)
        if truncated is None:
            truncated = segment.recover()
        segment.flush()
        if truncated:
            log.warning(
                "%s: corrupt data in segment %d, cut %d bytes and dropped %d later segments",
                directory.name, segment.base_offset, truncated, len(segments) - index - 1,
            )  # fmt: skip
            for later in segments[index + 1 :]:
                later.delete_files()
            del segments[index + 1 :]
            break
    return recovered
