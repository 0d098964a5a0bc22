"""The sparse offset index of one segment: `<base:020d>.index` (Kafka's OffsetIndex).

Owns: the mapping offset -> file position. Each 8-byte big-endian entry holds a relative offset
(int32, offset - base) and the position (int32) of the batch whose LAST offset that is, so a floor
lookup gives a position at or before the batch containing any offset. Entries are kept in memory
in two `array`s (bisect lookups, no mmap) and appended to the file through `IndexFile`.
Capacity is `segment.index.bytes` / 8 entries: a full index makes the log roll.

Sanity check on load (Kafka's `sanityCheck`, made stricter because it is cheap in memory): the file
is a whole number of entries and both columns strictly increase from >= 0. A failure raises
CorruptIndexError and the caller rebuilds the index from the log.

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import itertools
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from brokers.log.errors import CorruptIndexError
from brokers.log.file_ops import OS_FILES, FileOps
from brokers.log.index_file import IndexFile, IndexFileOwner

_ENTRY = struct.Struct(">ii")
ENTRY_SIZE = _ENTRY.size


class OffsetIndex(IndexFileOwner):
    def __init__(self, index_file: IndexFile, base_offset: int, max_index_bytes: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // ENTRY_SIZE)
        self._file = index_file
        self._relative_offsets = array("i")
        self._positions = array("i")

    @classmethod
    def create(
        cls, path: Path, base_offset: int, max_index_bytes: int, files: FileOps = OS_FILES
    ) -> OffsetIndex:
        return cls(IndexFile.create(path, ENTRY_SIZE, files), base_offset, max_index_bytes)

    @classmethod
    def empty(
        cls, path: Path, base_offset: int, max_index_bytes: int, files: FileOps = OS_FILES
    ) -> OffsetIndex:
        """Empty, its file not made yet (index_file: made by the first write or `materialize`)."""
        return cls(IndexFile.unmade(path, ENTRY_SIZE, files), base_offset, max_index_bytes)

    @classmethod
    def load(
        cls, path: Path, base_offset: int, max_index_bytes: int, files: FileOps = OS_FILES
    ) -> OffsetIndex:
        """Read and sanity-check; raises FileNotFoundError or CorruptIndexError."""
        index_file, data = IndexFile.load(path, ENTRY_SIZE, files)
        index = cls(index_file, base_offset, max_index_bytes)
        columns = array("i", data)
        if sys.byteorder == "little":
            columns.byteswap()
        index._relative_offsets = columns[0::2]
        index._positions = columns[1::2]
        index._sanity_check()
        return index

    def _sanity_check(self) -> None:
        for column, name in ((self._relative_offsets, "offsets"), (self._positions, "positions")):
            if column and column[0] < 0:
                raise CorruptIndexError(f"{self.path}: negative {name}")
            if any(a >= b for a, b in itertools.pairwise(column)):
                raise CorruptIndexError(f"{self.path}: {name} do not increase")

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def entries(self) -> int:
        return len(self._positions)

    @property
    def is_full(self) -> bool:
        return len(self._positions) >= self.max_entries

    def last_entry(self) -> tuple[int, int]:
        """(offset, position) of the last entry, or (base offset, 0) when empty."""
        if not self._positions:
            return self.base_offset, 0
        return self.base_offset + self._relative_offsets[-1], self._positions[-1]

    def append(self, offset: int, position: int) -> None:
        """Index the batch ending at `offset` that starts at `position`."""
        relative = offset - self.base_offset
        if self._positions and (
            relative <= self._relative_offsets[-1] or position <= self._positions[-1]
        ):
            raise CorruptIndexError(f"{self.path}: entry ({offset}, {position}) not after the last")
        self._relative_offsets.append(relative)
        self._positions.append(position)
        self._file.stage(_ENTRY.pack(relative, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= `offset` as (offset, position); (base, 0) if none."""
        slot = bisect_right(self._relative_offsets, offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._relative_offsets[slot], self._positions[slot]

    def floor_position(self, position: int) -> int:
        """Largest indexed batch position <= `position` (0, the first batch, if none)."""
        slot = bisect_right(self._positions, position) - 1
        return self._positions[slot] if slot >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Drop the entries for offsets >= `offset`."""
        keep = bisect_right(self._relative_offsets, offset - self.base_offset - 1)
        self._drop_from(keep)

    def truncate_to_position(self, position: int) -> None:
        """Drop the entries pointing at or past `position` (the log was cut there)."""
        self._drop_from(bisect_right(self._positions, position - 1))

    def reset(self) -> None:
        self._drop_from(0)

    def _drop_from(self, keep: int) -> None:
        del self._relative_offsets[keep:]
        del self._positions[keep:]
        self._file.truncate_entries(keep)

    def restore(self, entries: int) -> None:
        """Undo of a failed append: the first `entries` entries, in memory and in the file."""
        del self._relative_offsets[entries:]
        del self._positions[entries:]
        self._file.truncate_entries(entries)
