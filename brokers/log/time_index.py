"""The sparse time index of one segment: `<base:020d>.timeindex` (Kafka's TimeIndex).

Owns: the mapping timestamp -> offset. Each 12-byte big-endian entry holds the largest timestamp
seen so far in the segment (int64) and the relative offset (int32) of the batch carrying it. An
entry is only added when the timestamp grows (Kafka's `maybeAppend`), so both columns are sorted and
a floor lookup by timestamp gives an offset at or before the first batch reaching it. When a segment
becomes inactive its final maximum is appended even if the index is full (Kafka's
`onBecomeInactiveSegment`), so the last entry of an inactive segment is its largest timestamp.

Sanity check on load: whole entries, timestamps strictly increasing, offsets non-decreasing and
>= 0; otherwise CorruptIndexError and the caller rebuilds. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import itertools
import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from brokers.log.errors import CorruptIndexError
from brokers.log.file_ops import OS_FILES, FileOps
from brokers.log.index_file import IndexFile, IndexFileOwner

_ENTRY = struct.Struct(">qi")
ENTRY_SIZE = _ENTRY.size
NO_TIMESTAMP = -1


class TimeIndex(IndexFileOwner):
    def __init__(self, index_file: IndexFile, base_offset: int, max_index_bytes: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // ENTRY_SIZE)
        self._file = index_file
        self._timestamps = array("q")
        self._relative_offsets = array("i")

    @classmethod
    def create(
        cls, path: Path, base_offset: int, max_index_bytes: int, files: FileOps = OS_FILES
    ) -> TimeIndex:
        return cls(IndexFile.create(path, ENTRY_SIZE, files), base_offset, max_index_bytes)

    @classmethod
    def empty(
        cls, path: Path, base_offset: int, max_index_bytes: int, files: FileOps = OS_FILES
    ) -> TimeIndex:
        """Empty, its file not made yet (index_file: made by the first write or `materialize`)."""
        return cls(IndexFile.unmade(path, ENTRY_SIZE, files), base_offset, max_index_bytes)

    @classmethod
    def load(
        cls, path: Path, base_offset: int, max_index_bytes: int, files: FileOps = OS_FILES
    ) -> TimeIndex:
        """Read and sanity-check; raises FileNotFoundError or CorruptIndexError."""
        index_file, data = IndexFile.load(path, ENTRY_SIZE, files)
        index = cls(index_file, base_offset, max_index_bytes)
        for timestamp, relative in _ENTRY.iter_unpack(data):
            index._timestamps.append(timestamp)
            index._relative_offsets.append(relative)
        index._sanity_check()
        return index

    def _sanity_check(self) -> None:
        ts, rel = self._timestamps, self._relative_offsets
        if rel and rel[0] < 0:
            raise CorruptIndexError(f"{self.path}: negative offset")
        if any(a >= b for a, b in itertools.pairwise(ts)):
            raise CorruptIndexError(f"{self.path}: timestamps do not increase")
        if any(a > b for a, b in itertools.pairwise(rel)):
            raise CorruptIndexError(f"{self.path}: offsets go backwards")

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def entries(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        if not self._timestamps:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[-1], self.base_offset + self._relative_offsets[-1]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is newer than the last entry's."""
        if self.is_full and not skip_full_check:
            return
        last_timestamp, last_offset = self.last_entry()
        if timestamp <= last_timestamp or (offset < last_offset and self._timestamps):
            return
        relative = offset - self.base_offset
        self._timestamps.append(timestamp)
        self._relative_offsets.append(relative)
        self._file.stage(_ENTRY.pack(timestamp, relative))

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= `timestamp` as (timestamp, offset), else (-1, base)."""
        slot = bisect_right(self._timestamps, timestamp) - 1
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[slot], self.base_offset + self._relative_offsets[slot]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries for offsets >= `offset`."""
        self._drop_from(bisect_right(self._relative_offsets, offset - self.base_offset - 1))

    def reset(self) -> None:
        self._drop_from(0)

    def _drop_from(self, keep: int) -> None:
        del self._timestamps[keep:]
        del self._relative_offsets[keep:]
        self._file.truncate_entries(keep)

    def restore(self, entries: int) -> None:
        """Undo of a failed append: the first `entries` entries, in memory and in the file."""
        del self._timestamps[entries:]
        del self._relative_offsets[entries:]
        self._file.truncate_entries(entries)
