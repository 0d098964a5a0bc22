"""One compaction round over one log: its plan, groups and swaps (Kafka's doClean/replaceSegments).

Owns the steps of a round that touch the `Log`, all on the event loop:
- `CleaningPass.start`: the segments below the first uncleanable offset (never the active one),
  each with a duplicated read descriptor so a worker thread reads exactly the planned files even
  if they are renamed or closed meanwhile, and the aborted transactions its offsets overlap (from
  the `.txnindex` files: the worker never reads them); the aborted transactions of the dirty
  section; the active producers' last entries (Kafka's lastRecordsOfActiveProducers); the time.
  No transaction is open below the first uncleanable offset (the manager bounds it by the first
  unstable offset), so what is collected here is final for the planned range;
- `groups(end)`: Kafka's groupSegmentsBySize over the segments below the round's end: consecutive
  segments while their sizes sum to at most segment.bytes, each index's to at most
  segment.index.bytes, and their offsets stay within an int32 of the group's base;
- `swap(group, cleaned)`: the crash-safe replacement below; `close()` releases the descriptors.
  The cleaned segment's `.txnindex` (when it has entries) is renamed with its other files.

Swap, each step durable before the next:
 1. the log must still hold exactly the planned segments with their planned sizes, else
    CleaningAbortedError (truncation, retention or deletion happened: the offset map may be stale);
 2. the cleaned files are renamed `.cleaned` → `.swap` (log file last), the directory fsynced;
 3. `Log.replace_segments`: one step for readers; the old segments become `.deleted` and are
    unlinked after file.delete.delay.ms, so fetches holding their regions finish;
 4. `.swap` is stripped and the directory fsynced.
What a crash leaves, as `log_loader` finds it on restart:
 - before 2: `.cleaned` files are deleted; the old segments are intact;
 - from 2 on: the `.log.swap` replaces every segment file whose base offset lies within its
   offsets, `.deleted` files go: the group is the cleaned segment. Trailing segments of the group
   that kept nothing may survive unchanged; they hold only records superseded by later records
   still in the log (or tombstones), so every key still reads its latest value, and the next round
   removes them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from brokers.common.clock import Clock
from brokers.log.cleaner.batch_filter import LastRecord
from brokers.log.cleaner.cleaner import (
    CLEANED_SUFFIX,
    CleaningAbortedError,
    CleaningPlan,
    SourceSegment,
)
from brokers.log.log import Log
from brokers.log.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from brokers.log.segment import LogSegment
from brokers.log.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from brokers.log.txn_index import AbortedTxn

SWAP_SUFFIX = ".swap"
INT32_MAX = 2**31 - 1
Fault = Callable[[str], None]


def _no_fault(step: str) -> None:
    return None


class CleaningPass:
    def __init__(
        self, log: Log, plan: CleaningPlan, segments: Sequence[LogSegment], fault: Fault | None
    ) -> None:
        self.log = log
        self.plan = plan
        self._planned = {segment.base_offset: segment for segment in segments}
        self._expected = [(segment, segment.size) for segment in segments]
        self._fault = fault or _no_fault
        self._fds = [source.fd for source in plan.sources]

    @classmethod
    def start(
        cls, log: Log, *, first_dirty: int, first_uncleanable: int, now_ms: int, clock: Clock,
        fault: Fault | None = None,
    ) -> CleaningPass:  # fmt: skip
        everything = log.segments
        planned = [s for s in everything[:-1] if s.base_offset < first_uncleanable]
        sources: list[SourceSegment] = []
        try:
            for index, segment in enumerate(planned):
                next_base = everything[index + 1].base_offset
                aborted = tuple(log.collect_aborted(segment.base_offset, next_base))
                sources.append(_source(segment, next_base, aborted))
        except BaseException:
            for source in sources:
                os.close(source.fd)
            raise
        plan = CleaningPlan(
            log.directory, tuple(sources), first_dirty,
            _position_of(planned, first_dirty), first_uncleanable, now_ms,
            last_records_of_active_producers(log), log.config, clock,
            tuple(log.collect_aborted(first_dirty, first_uncleanable)),
        )  # fmt: skip
        return cls(log, plan, planned, fault)

    def groups(self, end_offset: int) -> list[list[SourceSegment]]:
        candidates = [s for s in self.plan.sources if s.base_offset < end_offset]
        config = self.plan.config
        return group_segments(candidates, config.segment_bytes, config.segment_index_bytes)

    def swap(self, group: Sequence[SourceSegment], cleaned: LogSegment) -> None:
        """Put `cleaned` (still `.cleaned`) in place of `group` (see the module docstring)."""
        try:
            old, at = self._verify(group)
        except CleaningAbortedError:
            cleaned.delete_files()
            raise
        self._fault("swap")
        _rename_files(cleaned, CLEANED_SUFFIX, SWAP_SUFFIX)
        _fsync_directory(self.log.directory)
        self._fault("swap-renamed")
        try:
            self.log.replace_segments(cleaned, old)
        except Exception:
            cleaned.delete_files()
            raise
        self._expected[at : at + len(old)] = [(cleaned, cleaned.size)]
        self._fault("swap-replaced")
        _rename_files(cleaned, SWAP_SUFFIX, "")
        _fsync_directory(self.log.directory)
        self._fault("swap-done")

    def _verify(self, group: Sequence[SourceSegment]) -> tuple[list[LogSegment], int]:
        current = self.log.segments
        if self.log.closed or len(current) <= len(self._expected):
            raise CleaningAbortedError(f"{self.log.directory.name} changed during cleaning")
        for (segment, size), now in zip(self._expected, current, strict=False):
            if now is not segment or now.size != size:
                raise CleaningAbortedError(f"{self.log.directory.name} changed during cleaning")
        old = [self._planned[source.base_offset] for source in group]
        at = next(i for i, (segment, _) in enumerate(self._expected) if segment is old[0])
        return old, at

    def close(self) -> None:
        """Release the duplicated descriptors (only once no worker reads them any more)."""
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def group_segments(
    segments: Sequence[SourceSegment], max_size: int, max_index_size: int
) -> list[list[SourceSegment]]:
    """Kafka's groupSegmentsBySize (a segment's last offset is bounded by its successor's base)."""
    groups: list[list[SourceSegment]] = []
    index = 0
    while index < len(segments):
        group = [segments[index]]
        size, index_bytes, time_bytes = (
            group[0].size,
            group[0].index_bytes,
            group[0].time_index_bytes,
        )
        index += 1
        while index < len(segments):
            candidate = segments[index]
            if (
                size + candidate.size > max_size
                or index_bytes + candidate.index_bytes > max_index_size
                or time_bytes + candidate.time_index_bytes > max_index_size
                or (
                    candidate.size > 0
                    and candidate.next_base - 1 - group[0].base_offset > INT32_MAX
                )
            ):
                break
            group.append(candidate)
            size += candidate.size
            index_bytes += candidate.index_bytes
            time_bytes += candidate.time_index_bytes
            index += 1
        groups.append(group)
    return groups


def last_records_of_active_producers(log: Log) -> dict[int, LastRecord]:
    """Kafka's lastRecordsOfActiveProducers: each producer's last data offset (None when its
    last entry is a marker of a new epoch, or it has none) and epoch."""
    return {
        pid: LastRecord(entry.last_data_offset if entry.last_data_offset >= 0 else None,
                        entry.producer_epoch)
        for pid, entry in log.producer_state.active_producers().items()
    }  # fmt: skip


def _source(segment: LogSegment, next_base: int, aborted: tuple[AbortedTxn, ...]) -> SourceSegment:
    file = segment.records.reader()  # held until duplicated (an inactive segment's is opened)
    fd = os.dup(file.fd)
    return SourceSegment(
        segment.base_offset, next_base, fd, segment.size,
        segment.offset_index.entries * OFFSET_ENTRY_SIZE,
        segment.time_index.entries * TIME_ENTRY_SIZE, os.fstat(fd).st_mtime_ns, aborted,
    )  # fmt: skip


def _position_of(segments: Sequence[LogSegment], offset: int) -> int:
    """File position of the batch holding `offset` in the segment holding it (0 if none)."""
    holding = [s for s in segments if s.base_offset <= offset]
    if not holding:
        return 0
    location = holding[-1].translate_offset(offset)
    return holding[-1].size if location is None else location.position


def _rename_files(segment: LogSegment, old_suffix: str, new_suffix: str) -> None:
    parts = (segment.offset_index, segment.time_index, segment.txn_index, segment.records)
    for part in parts:  # the log file last: its `.swap` is what recovery completes
        name = part.path.name.removesuffix(old_suffix) + new_suffix
        part.rename(part.path.with_name(name))


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
