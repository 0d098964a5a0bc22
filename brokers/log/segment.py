"""One log segment: `<base:020d>.log`, `.index`, `.timeindex`, `.txnindex` (Kafka's LogSegment).

Owns: appending whole batches (offsets already assigned) with their index entries, locating the
batch holding an offset, slicing whole batches for fetch, timestamp search, truncation, recovery
(re-validating every batch and rebuilding both indexes), the `segment.ms`/`segment.bytes`/index-full
roll decision, the two-step deletion (rename to `.deleted`, unlink later), and the undo of a failed
append: `mark()` before it, `roll_back(mark)` after a storage failure puts the files and the
in-memory state back exactly (the partition log decides when; see log.py).

The `.txnindex` (txn_index) lists the transactions aborted by markers in this segment; the
partition log appends to it (it knows the producer state), recovery empties it and the log's
producer-state replay refills it; it is truncated, renamed, deleted and undone with the segment.

Index entries are made per batch, whenever more than `index.interval.bytes` were appended since the
last entry, so a lookup never scans more than about one interval of headers. Lookups, reads and
recovery use batch headers only: no per-record work. `FileRegion`s handed out keep their file open and
readable for as long as they are held, `delete_files()` included (see file_records). Only the
active segment holds descriptors; an inactive one holds none (`release_descriptors`) and opens its
`.log` on demand for a read, which holds that one descriptor for its scans and its region.

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import NamedTuple, TypeVar

from typing_extensions import Buffer

from brokers.common.clock import Clock
from brokers.log.errors import CorruptIndexError, CorruptLogError
from brokers.log.file_ops import OS_FILES, FileOps
from brokers.log.file_records import FileRecords, FileRegion
from brokers.log.index_file import STAGE_LIMIT
from brokers.log.offset_index import OffsetIndex
from brokers.log.recovery import valid_batches
from brokers.log.time_index import NO_TIMESTAMP, TimeIndex
from brokers.log.txn_index import TransactionIndex
from brokers.records.batch import BatchHeader

LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX = ".log", ".index", ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
MAX_RELATIVE_OFFSET = 2**31 - 1  # index entries store offset - base as int32


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / f"{base_offset:020d}{suffix}"


def txn_index_path(log_path: Path) -> Path:
    """The `.txnindex` beside a `.log` file, with the same scratch suffix (`.cleaned`, ...)."""
    stem, _, scratch = log_path.name.partition(LOG_SUFFIX)
    return log_path.with_name(stem + TXN_INDEX_SUFFIX + scratch)


class BatchLocation(NamedTuple):
    """Where the batch holding an offset sits in the segment file."""

    base_offset: int
    position: int
    size: int
    header: BatchHeader


class SegmentMark(NamedTuple):
    """What an append changes in a segment, taken before it (`LogSegment.mark`)."""

    size: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    rolling_timestamp: int | None
    bytes_since_index_entry: int
    offset_entries: int
    time_entries: int
    txn_entries: int


class SegmentRead(NamedTuple):
    """Whole batches read from one segment; `region` is None when nothing fits."""

    region: FileRegion | None
    first_offset: int
    next_offset: int


class LogSegment:
    def __init__(
        self, base_offset: int, records: FileRecords, offset_index: OffsetIndex,
        time_index: TimeIndex, *, clock: Clock, index_interval_bytes: int, roll_jitter_ms: int = 0,
        txn_index: TransactionIndex | None = None, files: FileOps = OS_FILES,
    ) -> None:  # fmt: skip
        """`txn_index` None: an empty one beside `records`, its file made on the first entry."""
        self.base_offset = base_offset
        self.records = records
        self.offset_index = offset_index
        self.time_index = time_index
        if txn_index is None:
            txn_index = TransactionIndex(txn_index_path(records.path), base_offset, files)
        self.txn_index = txn_index
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self._clock = clock
        self.created_ms = clock.time_ms()
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self._rolling_timestamp: int | None = None  # first batch's max timestamp (segment.ms)
        self._bytes_since_index_entry = 0

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, *, clock: Clock, index_interval_bytes: int,
        max_index_bytes: int, roll_jitter_ms: int = 0, files: FileOps = OS_FILES,
        make_indexes: bool = True,
    ) -> LogSegment:  # fmt: skip
        """New empty files for a segment starting at `base_offset` (`preallocate` is not
        applied: files grow by appends, and the in-memory indexes need no preallocated mmap).
        `make_indexes=False`: only the `.log`, its indexes made once it holds data
        (index_file), for a directory with no other segment file in it (no stale index can be
        at their paths)."""
        log_path, index_path, time_index_path = (
            segment_path(directory, base_offset, suffix)
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        )
        if not make_indexes:  # as a prepared log's first segment, over a `.log` made here
            return cls.adopt_empty(
                directory, base_offset, files.open(log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC),
                clock=clock, index_interval_bytes=index_interval_bytes,
                max_index_bytes=max_index_bytes, roll_jitter_ms=roll_jitter_ms, files=files,
            )  # fmt: skip
        with ExitStack() as undo:  # a file that cannot be made removes those made before it
            records = FileRecords.open(log_path, create=True, files=files)
            undo.callback(records.delete)
            offset_index = OffsetIndex.create(index_path, base_offset, max_index_bytes, files)
            undo.callback(offset_index.delete)
            time_index = TimeIndex.create(time_index_path, base_offset, max_index_bytes, files)
            undo.pop_all()
        return cls(
            base_offset, records, offset_index, time_index, clock=clock,
            index_interval_bytes=index_interval_bytes, roll_jitter_ms=roll_jitter_ms, files=files,
        )  # fmt: skip

    @classmethod
    def adopt_empty(
        cls, directory: Path, base_offset: int, log_fd: int, *, clock: Clock,
        index_interval_bytes: int, max_index_bytes: int, roll_jitter_ms: int = 0,
        files: FileOps = OS_FILES,
    ) -> LogSegment:  # fmt: skip
        """A segment over an empty `.log` just made (open read-write as `log_fd`, which it
        takes), its indexes not made yet (index_file): nothing read back, no system call made."""
        log_path, index_path, time_index_path = (
            segment_path(directory, base_offset, suffix)
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        )
        return cls(
            base_offset, FileRecords(log_path, log_fd, 0, files),
            OffsetIndex.empty(index_path, base_offset, max_index_bytes, files),
            TimeIndex.empty(time_index_path, base_offset, max_index_bytes, files), clock=clock,
            index_interval_bytes=index_interval_bytes, roll_jitter_ms=roll_jitter_ms, files=files,
        )  # fmt: skip

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, *, clock: Clock, index_interval_bytes: int,
        max_index_bytes: int, roll_jitter_ms: int = 0, files: FileOps = OS_FILES,
    ) -> tuple[LogSegment, int | None]:  # fmt: skip
        """Open existing files. The second item is None when the indexes loaded, else the bytes
        cut while rebuilding them (Kafka's sanity check failed, or an index file is missing
        beside a non-empty `.log`; beside an empty one it is an index not made yet):
        a rebuild re-validates the data too and empties the `.txnindex`, which the caller must
        then refill from the markers (it needs the producer state; see producer_replay). A
        missing `.txnindex` is normal (created lazily), so it cannot itself trigger a rebuild."""
        records = FileRecords.open(segment_path(directory, base_offset, LOG_SUFFIX), files=files)
        paths = [segment_path(directory, base_offset, s) for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)]
        txn_path = txn_index_path(records.path)
        empty = records.size == 0  # its indexes may never have been made (index_file)
        try:
            offset_index = _load_index(
                OffsetIndex, paths[0], base_offset, max_index_bytes, files, empty
            )
            time_index = _load_index(
                TimeIndex, paths[1], base_offset, max_index_bytes, files, empty
            )
            segment = cls(
                base_offset, records, offset_index, time_index, clock=clock,
                index_interval_bytes=index_interval_bytes, roll_jitter_ms=roll_jitter_ms,
                txn_index=TransactionIndex.load(txn_path, base_offset, files), files=files,
            )  # fmt: skip
            segment.load_tail()
            return segment, None
        except (FileNotFoundError, CorruptIndexError, CorruptLogError):
            segment = cls(
                base_offset, records,
                OffsetIndex.create(paths[0], base_offset, max_index_bytes, files),
                TimeIndex.create(paths[1], base_offset, max_index_bytes, files), clock=clock,
                index_interval_bytes=index_interval_bytes, roll_jitter_ms=roll_jitter_ms,
                txn_index=_existing_txn_index(txn_path, base_offset, files), files=files,
            )  # fmt: skip
            return segment, segment.recover()

    # -- state ------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.records.size

    @property
    def largest_timestamp(self) -> int:
        """Largest batch timestamp, or the file's mtime when none is known (Kafka's rule)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.stat(self.records.path).st_mtime_ns // 1_000_000

    @property
    def descriptors_held(self) -> int:
        """The descriptors this segment holds open now: 1 while active (its `.log`, read and
        written through one descriptor), 0 when inactive; index files hold none between writes
        (index_file, brokers/common/descriptors.py)."""
        return int(self.records.reader_held)

    def load_tail(self) -> None:
        """Derive next offset and max timestamp from the last index entries and the headers after
        them; raises CorruptIndexError when the indexes disagree with the log."""
        last_indexed, position = self.offset_index.last_entry()
        indexed = self.offset_index.entries > 0
        if indexed and position >= self.size:
            raise CorruptIndexError(f"{self.offset_index.path}: position {position} past the end")
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry()
        self.next_offset = self.base_offset
        for pos, header in self.records.headers(position):
            if pos == position and indexed and header.last_offset != last_indexed:
                raise CorruptIndexError(f"{self.offset_index.path}: entry does not match the log")
            self._track_max_timestamp(header)
            self.next_offset = header.next_offset
        if self.time_index.entries and self.offset_of_max_timestamp >= self.next_offset:
            raise CorruptIndexError(f"{self.time_index.path}: entry past the end of the log")
        last_aborted = self.txn_index.last_offset
        if last_aborted is not None and last_aborted >= self.next_offset:
            raise CorruptIndexError(f"{self.txn_index.path}: entry past the end of the log")
        self._bytes_since_index_entry = self.size - position
        self._rolling_timestamp = self._first_batch_timestamp()

    def _first_batch_timestamp(self) -> int | None:
        for _, header in self.records.headers(0):
            return header.max_timestamp
        return None

    def _track_max_timestamp(self, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.base_offset

    # -- appends ----------------------------------------------------------------------------

    def append(self, batches: Sequence[BatchHeader], parts: Sequence[Buffer]) -> None:
        """Write `parts` (the bytes of `batches`, offsets assigned) with one writev, then index."""
        if not batches:
            return
        position = self.size
        self.records.append(parts)
        if position == 0:
            self._rolling_timestamp = max(h.max_timestamp for h in batches)
        for header in batches:
            self._index_batch(header, position)
            position += header.size
        self.next_offset = batches[-1].next_offset
        self.offset_index.write_staged(STAGE_LIMIT)  # else at the flush, roll or close
        self.time_index.write_staged(STAGE_LIMIT)

    def _index_batch(self, header: BatchHeader, position: int) -> None:
        self._track_max_timestamp(header)
        if self._bytes_since_index_entry > self.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += header.size

    def mark(self) -> SegmentMark:
        """The state an append may change, for `roll_back` if the append fails."""
        return SegmentMark(
            self.size, self.next_offset, self.max_timestamp, self.offset_of_max_timestamp,
            self._rolling_timestamp, self._bytes_since_index_entry, self.offset_index.entries,
            self.time_index.entries, len(self.txn_index),
        )  # fmt: skip

    def roll_back(self, mark: SegmentMark) -> None:
        """Undo everything since `mark`: the files are cut back to their sizes then (whatever a
        failed or torn write left past them) and the in-memory state is restored. Raises OSError
        when a file cannot be cut; the segment must not be written again then."""
        self.records.keep_reader()  # active again if a failed roll had made it inactive
        self.offset_index.restore(mark.offset_entries)
        self.time_index.restore(mark.time_entries)
        self.txn_index.restore(mark.txn_entries)
        self.records.restore_size(mark.size)
        self.next_offset = mark.next_offset
        self.max_timestamp = mark.max_timestamp
        self.offset_of_max_timestamp = mark.offset_of_max_timestamp
        self._rolling_timestamp = mark.rolling_timestamp
        self._bytes_since_index_entry = mark.bytes_since_index_entry

    def should_roll(
        self, *, messages_size: int, max_timestamp: int, max_offset: int, now_ms: int,
        segment_bytes: int, segment_ms: int,
    ) -> bool:  # fmt: skip
        """Kafka's LogSegment.shouldRoll: size, age (from the first batch's timestamp), a full
        index, or offsets that no longer fit an int32 relative offset."""
        waited = self.time_waited_for_roll(now_ms, max_timestamp)
        return (
            self.size > segment_bytes - messages_size
            or (self.size > 0 and waited > segment_ms - self.roll_jitter_ms)
            or self.offset_index.is_full
            or self.time_index.is_full
            or max_offset - self.base_offset > MAX_RELATIVE_OFFSET
        )

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        if self._rolling_timestamp is not None and self._rolling_timestamp >= 0:
            return message_timestamp - self._rolling_timestamp
        return now_ms - self.created_ms

    # -- lookups and reads ------------------------------------------------------------------

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchLocation | None:
        """The first batch whose last offset is >= `offset`, or None past this segment's end."""
        _, position = self.offset_index.lookup(offset)
        for pos, header in self.records.headers(max(position, start_position)):
            if header.last_offset >= offset:
                return BatchLocation(header.base_offset, pos, header.size, header)
        return None

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None,
        min_one_batch: bool = True,
    ) -> SegmentRead | None:  # fmt: skip
        """Whole batches from the one holding `start_offset`, up to `max_size` bytes (at least one
        batch when `min_one_batch`, KIP-74) and never past `max_position` (a batch boundary)."""
        file = self.records.reader()  # one descriptor for the scans and the region (file_records)
        first = self.translate_offset(start_offset)
        if first is None:
            return None
        limit = self.size if max_position is None else min(max_position, self.size)
        empty = SegmentRead(None, first.base_offset, first.base_offset)
        if first.position + first.size > limit:
            return empty
        if first.size > max_size:
            if not min_one_batch:
                return empty
            end, next_offset = first.position + first.size, first.header.next_offset
        else:
            end, next_offset = self._whole_batches_end(first, min(limit, first.position + max_size))
        return SegmentRead(
            self.records.region(first.position, end - first.position, file),
            first.base_offset,
            next_offset,
        )

    def _whole_batches_end(self, first: BatchLocation, limit: int) -> tuple[int, int]:
        """End position and next offset of the last whole batch ending at or before `limit`."""
        end, next_offset = first.position + first.size, first.header.next_offset
        # Jump to the last indexed batch before the limit: the batches before it all fit.
        start = max(self.offset_index.floor_position(limit), end)
        for position, header in self.records.headers(start):
            if position + header.size > limit:
                if position > end:
                    end, next_offset = position, header.base_offset
                break
            end, next_offset = position + header.size, header.next_offset
        return end, next_offset

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int, int] | None:
        """(offset, batch max timestamp, partition leader epoch) of the first batch at or after
        `starting_offset` whose max timestamp is >= `timestamp`; batch granularity, no records."""
        _, indexed_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(indexed_offset, starting_offset))
        for _, header in self.records.headers(position):
            if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                offset = max(header.base_offset, starting_offset)
                return offset, header.max_timestamp, header.partition_leader_epoch
        return None

    # -- recovery and truncation ------------------------------------------------------------

    def recover(self) -> int:
        """Re-validate every batch (size, CRC32C, offsets), truncate at the first bad one and
        rebuild both offset indexes; the `.txnindex` is emptied for the log to refill. Returns
        the number of bytes cut off."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self.next_offset = self.base_offset
        self._bytes_since_index_entry = 0
        valid_end = 0
        for position, header in valid_batches(self.records, self.base_offset):
            self._index_batch(header, position)
            valid_end = position + header.size
            self.next_offset = header.next_offset
        truncated = self.size - valid_end
        self.records.truncate_to(valid_end)
        self.offset_index.write_staged()
        self.time_index.write_staged()
        self._rolling_timestamp = self._first_batch_timestamp()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding `offset` and everything after; returns bytes removed."""
        location = self.translate_offset(offset)
        if location is None:
            return 0
        removed = self.size - location.position
        self.offset_index.truncate_to_position(location.position)
        self.time_index.truncate_to(location.base_offset)
        self.txn_index.truncate_to(location.base_offset)
        self.records.truncate_to(location.position)
        self.load_tail()
        if self.size == 0:
            self.created_ms = self._clock.time_ms()
        return removed

    # -- lifecycle ---------------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """The segment was rolled (or is closed): record its final max timestamp, make its
        index files if it holds data, drop its descriptors."""
        self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
        )
        self._materialize_indexes()
        self.release_descriptors()

    def _materialize_indexes(self) -> None:
        """A segment holding data has both index files on disk once inactive or closed, as a
        clean restart expects."""
        if self.records.size:
            self.offset_index.materialize()
            self.time_index.materialize()

    def release_descriptors(self) -> None:
        """Hold no descriptor: an inactive segment (rolled, loaded below the active one, or
        being deleted) reopens its `.log` for a read on demand (file_records); its indexes'
        staged entries are written now, so a partition holds only its active segment's 1."""
        self.time_index.close()
        self.offset_index.close()
        self.txn_index.close()
        self.records.release_reader()

    def flush(self) -> None:
        """fsync what is written; an index not made yet stays unmade (an unclean restart
        recovers the segment at the recovery point and after it anyway, and a file made here
        could fail with EMFILE after the data was appended)."""
        self.records.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        self.on_become_inactive()
        self.records.close()

    def rename_to_deleted(self) -> None:
        """First step of Kafka's asynchronous delete: regions keep their descriptors."""
        self.release_descriptors()
        for part in (self.records, self.offset_index, self.time_index, self.txn_index):
            part.rename(part.path.with_name(part.path.name + DELETED_SUFFIX))

    def delete_files(self) -> None:
        self.records.delete()
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def file_paths(self) -> list[Path]:
        """Its files (the `.txnindex` may not exist: it is made with its first entry)."""
        return [
            self.records.path,
            self.offset_index.path,
            self.time_index.path,
            self.txn_index.path,
        ]

    def close_for_unlink(self) -> list[Path]:
        """Close what this deleted segment holds (writing nothing more) and name its files, for
        the caller to unlink elsewhere: unlinking a full 1 GiB segment took 241 ms here."""
        self.records.close()
        self.offset_index.release()
        self.time_index.release()
        self.txn_index.release()
        return self.file_paths()


_Index = TypeVar("_Index", OffsetIndex, TimeIndex)


def _load_index(
    kind: type[_Index], path: Path, base_offset: int, max_index_bytes: int, files: FileOps,
    log_is_empty: bool,
) -> _Index:  # fmt: skip
    """The index loaded, or empty and not made yet when its file is missing beside an empty
    `.log` (a missing file beside data raises FileNotFoundError: the segment is rebuilt)."""
    try:
        return kind.load(path, base_offset, max_index_bytes, files)
    except FileNotFoundError:
        if not log_is_empty:
            raise
        return kind.empty(path, base_offset, max_index_bytes, files)


def _existing_txn_index(path: Path, base_offset: int, files: FileOps) -> TransactionIndex:
    """The `.txnindex` of a segment about to be recovered: its file, if any, is kept (and
    emptied by the recovery) so that it is renamed and deleted with the segment."""
    try:
        return TransactionIndex.load(path, base_offset, files)
    except CorruptIndexError:
        index = TransactionIndex(path, base_offset, files)
        files.unlink(path)
        return index
