"""Compaction's heavy part: offset map of the dirty section, cleaned copies (Kafka's Cleaner).

Owns, for one cleaning round planned by `cleaning_pass`:
- `build_offset_map`: every keyed record of the dirty section [first dirty, first uncleanable) goes
  into the OffsetMap, whole batches at a time, except the records of aborted transactions (Kafka
  skips them: an aborted value must never hide an older committed one, since the cleaner drops the
  aborted records); a batch that no longer fits (counting its records,
  an upper bound of its new keys), or that reaches past the first uncleanable offset (the high
  watermark may sit inside a segment), ends the round there. The round's end offset is the map's
  latest offset + 1, always a batch boundary; after a whole segment it fast-forwards over the
  offset gap to the next segment (Kafka's updateLatestOffset);
- `clean_group`: the batches of a group of segments, filtered by `batch_filter`, appended to one
  new segment written aside as `<base>.log.cleaned` (+ `.index.cleaned`, `.timeindex.cleaned`,
  and `.txnindex.cleaned` listing the aborted transactions whose ABORT marker it keeps while some
  of their data was walked, see `transactions`), indexed, fsynced and given the last source
  segment's mtime (Kafka keeps lastModified). One `CleanedTransactions` is carried through the
  groups of a round, fed each segment's aborted transactions (read from the `.txnindex` when the
  round was planned) before the segment is walked.
Reads go through `os.pread` in chunks of `log.cleaner.io.buffer.size`, grown for a larger batch;
bytes read and written pass through the throttle. Batches are CRC-checked before being rebuilt, so
a corrupt batch stops the round (CorruptRecordError) rather than being re-signed.

Concurrency: touches no `Log`. Sources are `SourceSegment`s with their own duplicated descriptors
and sizes fixed when planned, and the `.cleaned` files are the round's own, so both methods may
run on a worker thread while the event loop serves the log. One round at a time (map, throttle
and stats are reused); `abort()` may be called from any thread and stops the round at its next
batch with CleaningAbortedError, its `.cleaned` files removed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from typing_extensions import Buffer

from brokers.common.clock import Clock
from brokers.log.cleaner.batch_filter import (
    FilterContext,
    LastRecord,
    batch_payload,
    filter_batch,
    record_keys,
)
from brokers.log.cleaner.offset_map import OffsetMap
from brokers.log.cleaner.throttler import Throttler
from brokers.log.cleaner.transactions import CleanedTransactions
from brokers.log.config import LogConfig
from brokers.log.errors import CorruptLogError, LogError
from brokers.log.file_records import FileRecords
from brokers.log.offset_index import OffsetIndex
from brokers.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    segment_path,
)
from brokers.log.time_index import TimeIndex
from brokers.log.txn_index import AbortedTxn
from brokers.records.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, parse_header
from brokers.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE

CLEANED_SUFFIX = ".cleaned"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


class CleaningAbortedError(LogError):
    """The round was stopped (abort requested, or the log changed under it); nothing was lost."""


class CleanerError(LogError):
    """A log the cleaner cannot make progress on (e.g. one batch larger than the offset map)."""


@dataclass(frozen=True, slots=True)
class SourceSegment:
    """One segment as the cleaner reads it, off the event loop: its own descriptor, fixed size."""

    base_offset: int
    next_base: int  # the following segment's base offset: no offset of this one reaches it
    fd: int
    size: int
    index_bytes: int
    time_index_bytes: int
    mtime_ns: int
    aborted: tuple[AbortedTxn, ...] = ()  # collect_aborted(base_offset, next_base) when planned


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    directory: Path
    sources: tuple[SourceSegment, ...]  # every segment below the first uncleanable offset
    first_dirty: int
    first_dirty_position: int  # file position of the batch holding it, in its segment
    first_uncleanable: int
    now_ms: int
    producer_last_records: Mapping[int, LastRecord]
    config: LogConfig
    clock: Clock
    dirty_aborted: tuple[AbortedTxn, ...] = ()  # collect_aborted(first_dirty, first_uncleanable)

    def dirty_sources(self) -> Iterator[tuple[SourceSegment, int]]:
        """(segment, start position) of each segment holding dirty offsets."""
        for source in self.sources:
            if source.next_base > self.first_dirty and source.base_offset < self.first_uncleanable:
                start = self.first_dirty_position if source.base_offset <= self.first_dirty else 0
                yield source, start


@dataclass(slots=True)
class CleanerStats:
    map_records: int = 0
    map_bytes_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0


class Cleaner:
    def __init__(
        self, offset_map: OffsetMap, throttler: Throttler, *, io_buffer_size: int,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:  # fmt: skip
        self.offset_map = offset_map
        self.throttler = throttler
        self.io_buffer_size = io_buffer_size
        self.max_decompressed_size = max_decompressed_size
        self._abort = threading.Event()

    def abort(self) -> None:
        self._abort.set()

    def reset(self) -> None:
        """Ready for a new round: clear an old abort request, start a fresh throttle period."""
        self._abort.clear()
        self.throttler.reset()

    def _check_done(self) -> None:
        if self._abort.is_set():
            raise CleaningAbortedError("cleaning aborted")

    # -- the offset map ---------------------------------------------------------------------

    def build_offset_map(self, plan: CleaningPlan, stats: CleanerStats) -> int:
        """Index the dirty section; returns the round's end offset (first offset not cleaned)."""
        self.offset_map.clear()
        transactions = CleanedTransactions(plan.dirty_aborted)
        for source, position in plan.dirty_sources():
            if not self._map_segment(plan, source, position, transactions, stats):
                break
        return self.offset_map.latest_offset + 1

    def _map_segment(
        self, plan: CleaningPlan, source: SourceSegment, position: int,
        transactions: CleanedTransactions, stats: CleanerStats,
    ) -> bool:  # fmt: skip
        """Index one segment; False when the round ends inside it (map full or upper bound)."""
        offset_map = self.offset_map
        for batch, header in self._batches(source, position, stats, mapping=True):
            self._check_done()
            if header.next_offset > plan.first_uncleanable:
                return False
            if header.is_control:
                transactions.on_control_batch(batch, header)
                keyless = True
            else:
                keyless = transactions.on_batch(header)  # aborted: its keys are not indexed
            if header.last_offset < plan.first_dirty:
                continue
            if not keyless:
                if offset_map.size + header.records_count > offset_map.max_entries:
                    if offset_map.latest_offset < plan.first_dirty:
                        raise CleanerError(
                            f"a batch of {header.records_count} records does not fit the offset "
                            f"map ({offset_map.max_entries} keys): raise "
                            "log.cleaner.dedupe.buffer.size"
                        )
                    return False
                self._index_batch(batch, header, plan.first_dirty, stats)
            offset_map.update_latest_offset(header.last_offset)
        offset_map.update_latest_offset(min(source.next_base, plan.first_uncleanable) - 1)
        return True

    def _index_batch(
        self, batch: memoryview, header: BatchHeader, first_dirty: int, stats: CleanerStats
    ) -> None:
        payload = batch_payload(batch, header, self.max_decompressed_size)
        base, put = header.base_offset, self.offset_map.put
        for delta, key, _, _, _ in record_keys(payload, header.records_count):
            if key is not None and base + delta >= first_dirty:
                put(key, base + delta)
        stats.map_records += header.records_count

    # -- cleaning ---------------------------------------------------------------------------

    def filter_context(self, plan: CleaningPlan) -> FilterContext:
        """What the groups of a round are filtered with, once its offset map is built."""
        return FilterContext(
            plan.now_ms, plan.config.delete_retention_ms, self.offset_map.latest_offset,
            plan.first_uncleanable, plan.producer_last_records, self.max_decompressed_size,
        )  # fmt: skip

    def clean_group(
        self, plan: CleaningPlan, group: Sequence[SourceSegment], context: FilterContext,
        transactions: CleanedTransactions, stats: CleanerStats,
    ) -> LogSegment:  # fmt: skip
        """One `.cleaned` segment holding what `group` keeps; flushed, writers closed.
        `transactions` is the round's, carried from the previous group."""
        cleaned = create_cleaned_segment(plan.directory, group[0].base_offset, plan)
        try:
            for source in group:
                transactions.add_aborted(source.aborted)
                self._clean_into(source, cleaned, context, transactions, stats)
            write_txn_index(cleaned, transactions.take_retained())
            cleaned.on_become_inactive()
            cleaned.flush()
            mtime = group[-1].mtime_ns
            os.utime(cleaned.records.path, ns=(mtime, mtime))
        except Exception:  # a crash (BaseException in tests) leaves the files, as a real one would
            cleaned.delete_files()
            raise
        return cleaned

    def _clean_into(
        self, source: SourceSegment, cleaned: LogSegment, context: FilterContext,
        transactions: CleanedTransactions, stats: CleanerStats,
    ) -> None:  # fmt: skip
        headers: list[BatchHeader] = []
        parts: list[Buffer] = []
        pending = 0
        for batch, header in self._batches(source, 0, stats, mapping=False):
            self._check_done()
            if header.is_control:
                discardable = transactions.on_control_batch(batch, header)
            else:
                discardable = transactions.on_batch(header)
            result = filter_batch(batch, header, self.offset_map, context, discardable=discardable)
            stats.records_read += result.records_read
            stats.records_kept += result.records_kept
            if result.data is None or result.header is None:
                continue
            headers.append(result.header)
            parts.append(result.data)
            pending += result.header.size
            if pending >= self.io_buffer_size:
                self._write(cleaned, headers, parts, stats)
                headers, parts, pending = [], [], 0
        if headers:
            self._write(cleaned, headers, parts, stats)

    def _write(
        self, cleaned: LogSegment, headers: list[BatchHeader], parts: list[Buffer],
        stats: CleanerStats,
    ) -> None:  # fmt: skip
        cleaned.append(headers, parts)
        written = sum(header.size for header in headers)
        stats.bytes_written += written
        self.throttler.maybe_throttle(written)

    def _batches(
        self, source: SourceSegment, start: int, stats: CleanerStats, *, mapping: bool
    ) -> Iterator[tuple[memoryview, BatchHeader]]:
        for chunk_size, batches in read_batches(source, start, self.io_buffer_size):
            if mapping:
                stats.map_bytes_read += chunk_size
            else:
                stats.bytes_read += chunk_size
            self.throttler.maybe_throttle(chunk_size)
            yield from batches


def read_batches(
    source: SourceSegment, start: int, chunk_size: int
) -> Iterator[tuple[int, list[tuple[memoryview, BatchHeader]]]]:
    """(bytes read, whole batches) per chunk of `source` from `start` to its planned size; a
    chunk grows to hold a batch larger than `chunk_size`. Raises CorruptLogError when the file is
    shorter than planned (truncated under the round) or a batch header is bad."""
    position, wanted = start, chunk_size
    while position < source.size:
        size = min(wanted, source.size - position)
        chunk = os.pread(source.fd, size, position)
        if len(chunk) < size:
            raise CorruptLogError(f"segment {source.base_offset} is shorter than {source.size}")
        view, at, batches = memoryview(chunk), 0, []
        while at + HEADER_SIZE <= len(view):
            header = parse_header(view, at)
            if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                raise CorruptLogError(f"bad batch length in segment {source.base_offset}")
            if at + header.size > len(view):
                break
            batches.append((view[at : at + header.size], header))
            at += header.size
        wanted = chunk_size
        if not batches:  # one batch larger than the chunk: read it whole
            wanted = parse_header(view).size if len(view) >= HEADER_SIZE else HEADER_SIZE
            if position + wanted > source.size:
                raise CorruptLogError(f"truncated batch in segment {source.base_offset}")
        position += at
        yield len(chunk), batches


def create_cleaned_segment(directory: Path, base_offset: int, plan: CleaningPlan) -> LogSegment:
    """Empty `<base>.log.cleaned` (+ indexes), replacing leftovers of an earlier attempt. Its
    `.txnindex.cleaned` is created only if it gets an entry (`write_txn_index`)."""
    paths = [segment_path(directory, base_offset, s + CLEANED_SUFFIX) for s in SEGMENT_SUFFIXES]
    for path in paths:
        path.unlink(missing_ok=True)
    index_bytes = plan.config.segment_index_bytes
    return LogSegment(
        base_offset, FileRecords.open(paths[0], create=True),
        OffsetIndex.create(paths[1], base_offset, index_bytes),
        TimeIndex.create(paths[2], base_offset, index_bytes), clock=plan.clock,
        index_interval_bytes=plan.config.index_interval_bytes,
    )  # fmt: skip


def write_txn_index(cleaned: LogSegment, retained: Sequence[AbortedTxn]) -> None:
    """The cleaned segment's `.txnindex`: the aborted transactions whose marker it keeps while
    some of their data was walked (in marker order, as they were walked)."""
    for txn in retained:
        cleaned.txn_index.append(txn)
