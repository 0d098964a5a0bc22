"""The aborted transactions of one segment: `<base:020d>.txnindex` (Kafka's TransactionIndex).

Owns: `AbortedTxn` and the per-segment file listing every transaction whose ABORT marker sits in
that segment, in marker order. Each 34-byte big-endian entry (Kafka's AbortedTxn, version 0) is
version int16 | producer id int64 | first offset int64 | last offset int64 (the marker's offset) |
last stable offset int64 (the LSO when the marker was written). A transaction may start in an
earlier segment; its entry belongs to the segment of its marker.

Like Kafka's, the file is created only when a segment gets its first entry (most segments never
do), truncated with its segment, renamed and deleted with it; recovery rebuilds it from the
ABORT markers (see producer_replay). Entries are kept in memory as four int64 columns (32
bytes an entry, bisect by last offset): `collect` answers a read_committed fetch without
touching the disk, and a partition with many aborts costs little memory. Writes go through
`IndexFile` (so through the `FileOps` seam), one write per entry at once: markers are rare. As
for every index file, the descriptor is open only during a write (append, truncation, undo,
fsync): a segment with aborted transactions holds no descriptor past the 1 the broker's budget
promises a partition (brokers/common/descriptors.py); an entry costs one `open` and one `close`
(~4 µs of thread CPU: 8-9 µs an entry against 4.3-5.3 µs with a descriptor kept open;
docs/broker-config.md), and aborts are rare. Reads never touch the file.

Sanity check on load: a whole number of entries, version 0, last offsets increasing and not
below the segment's base (Kafka checks the last). A failure raises CorruptIndexError and the
segment is recovered. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path

from brokers.log.errors import CorruptIndexError
from brokers.log.file_ops import OS_FILES, FileOps
from brokers.log.index_file import IndexFile

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


_NO_ENTRIES = array("q")  # shared by every index without entries: never appended to


class TransactionIndex:
    def __init__(
        self, path: Path, base_offset: int, files: FileOps = OS_FILES,
        index_file: IndexFile | None = None,
    ) -> None:  # fmt: skip
        """An empty index at `path`; without `index_file` no file exists yet (made on append)."""
        self.path = path
        self.base_offset = base_offset
        self._files = files
        self._file = index_file
        # The columns: `_NO_ENTRIES` until the first entry (most segments never have one, and
        # four empty arrays are ~0.3 KiB per segment: issue 25's 10,000 partitions).
        self._pids = self._firsts = self._lasts = self._lsos = _NO_ENTRIES

    @classmethod
    def load(cls, path: Path, base_offset: int, files: FileOps = OS_FILES) -> TransactionIndex:
        """Read `path` if it exists (an absent file is an empty index); CorruptIndexError."""
        try:
            index_file, data = IndexFile.load(path, ENTRY_SIZE, files)
        except FileNotFoundError:
            return cls(path, base_offset, files)
        index = cls(path, base_offset, files, index_file)
        previous = base_offset - 1
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
            if version != VERSION or last <= previous or first > last:
                raise CorruptIndexError(
                    f"{path}: bad entry (version {version}, offsets {first}..{last}) after "
                    f"{previous}"
                )
            index._add(AbortedTxn(pid, first, last, lso))
            previous = last
        return index

    # -- reads ------------------------------------------------------------------------------

    @property
    def entries(self) -> tuple[AbortedTxn, ...]:
        return tuple(self._entry(i) for i in range(len(self._lasts)))

    def __len__(self) -> int:
        return len(self._lasts)

    @property
    def last_offset(self) -> int | None:
        return self._lasts[-1] if self._lasts else None

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset) and whether the
        search is complete: an entry whose LSO reaches the upper bound proves that no later
        marker can end a transaction that started below it (Kafka's collectAbortedTxns)."""
        found = []
        for i in range(bisect_left(self._lasts, fetch_offset), len(self._lasts)):
            if self._firsts[i] < upper_bound_offset:
                found.append(self._entry(i))
            if self._lsos[i] >= upper_bound_offset:
                return found, True
        return found, False

    def _entry(self, i: int) -> AbortedTxn:
        return AbortedTxn(self._pids[i], self._firsts[i], self._lasts[i], self._lsos[i])

    def _add(self, txn: AbortedTxn) -> None:
        if self._lasts is _NO_ENTRIES:
            self._pids, self._firsts = array("q"), array("q")
            self._lasts, self._lsos = array("q"), array("q")
        self._pids.append(txn.producer_id)
        self._firsts.append(txn.first_offset)
        self._lasts.append(txn.last_offset)
        self._lsos.append(txn.last_stable_offset)

    # -- writes -----------------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        """Write one entry now; last offsets must increase (ValueError otherwise)."""
        last = self.last_offset
        if (last is not None and txn.last_offset <= last) or txn.last_offset < self.base_offset:
            raise ValueError(
                f"{self.path}: aborted txn at {txn.last_offset} does not follow {last}"
            )
        if self._file is None:
            # The segment's first entry: a fresh file (a stale one of the same name is emptied).
            self._file = IndexFile.create(self.path, ENTRY_SIZE, self._files)
        self._add(txn)
        self._file.stage(txn.encode())
        self._file.write_staged()  # a failure is undone by `restore`

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (the segment was cut there)."""
        self.restore(bisect_left(self._lasts, offset))

    def restore(self, count: int) -> None:
        """Keep exactly the first `count` entries, on disk too (also the undo of an append
        whose write failed half way). Raises OSError when the file cannot be cut."""
        for column in (self._pids, self._firsts, self._lasts, self._lsos):
            del column[count:]
        if self._file is None:
            return
        if count == 0:  # an empty index has no file, as if it had never had an entry
            self._file.delete()
            self._file = None
        else:
            self._file.truncate_entries(count)

    def reset(self) -> None:
        """Forget every entry (recovery rebuilds them)."""
        self.restore(0)

    # -- lifecycle --------------------------------------------------------------------------

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def release(self) -> None:
        """Forget staged entries without writing them (the segment is being deleted)."""
        if self._file is not None:
            self._file.release()

    def rename(self, path: Path) -> None:
        if self._file is not None:
            self._file.rename(path)
        elif self.path.exists():  # not this index's file (it has none): never carry it along
            self._files.unlink(self.path)
        self.path = path

    def delete(self) -> None:
        if self._file is not None:
            self._file.delete()
        elif self.path.exists():  # a stale file of the same name goes too
            self._files.unlink(self.path)
