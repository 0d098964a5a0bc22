"""The file behind a segment index: fixed-size entries, appended, truncated, renamed, deleted.

Owns: the bytes on disk of `.index`, `.timeindex` and `.txnindex` files (Kafka's AbstractIndex
without the mmap). Entries live in memory in the index classes; this class only persists them.
New entries are staged in memory and written with one `os.write` when `STAGE_LIMIT` bytes are
staged, at a flush (a roll, the recovery point's flush), at close, and before a truncation, so
appends of many small batches cost no index syscall at all. Like Kafka's mmapped indexes,
entries not yet flushed are not durable: after an unclean shutdown every segment from the
recovery point on is recovered and its indexes rebuilt from the log (log_loader), and below the
recovery point every segment was flushed, indexes included. No descriptor is held between calls:
each write, truncation or fsync opens the file and closes it again, so an index costs its
partition no descriptor (brokers/common/descriptors.py). The file is never preallocated: its size
is always a whole number of entries, which is what the load-time sanity check relies on;
`truncate_entries` (also the undo of a failed append) cuts the file back to a whole number of entries
even after a torn write. Every call goes through the `FileOps` seam (file_ops).

The indexes of a new partition's first segment are not made with it (`IndexFile.unmade`): the
file is made by its first write, or by `materialize` once its segment holds data (at a roll
or close), so a clean restart finds an index beside every non-empty `.log` as before (an unclean
one recovers the segments from the recovery point on, rebuilding their indexes), and a
segment whose `.log` is empty loads with empty indexes when their files are missing (segment).
Each file costs a creation (an inode: 0.2-3 ms of kernel time on this machine's disk), and a
topic churn makes thousands of partitions that are never written.

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from brokers.log.errors import CorruptIndexError
from brokers.log.file_ops import OS_FILES, FileOps

STAGE_LIMIT = 8192  # bytes staged before an append writes them: ~1,000 entries, 8 KiB a file


class IndexFile:
    def __init__(self, path: Path, entry_size: int, files: FileOps = OS_FILES) -> None:
        self.path = path
        self.entry_size = entry_size
        self._files = files
        self._staged = bytearray()
        self._written_entries = 0
        self._unsynced = False
        self._torn = False  # a write failed: the file may hold bytes past `_written_entries`
        self._made = True  # the file exists (False: `unmade`, until its first write)

    @classmethod
    def create(cls, path: Path, entry_size: int, files: FileOps = OS_FILES) -> IndexFile:
        """A new, empty index file (an existing one is emptied)."""
        os.close(files.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
        return cls(path, entry_size, files)

    @classmethod
    def unmade(cls, path: Path, entry_size: int, files: FileOps = OS_FILES) -> IndexFile:
        """An empty index whose file is not made yet (module docstring)."""
        index_file = cls(path, entry_size, files)
        index_file._made = False
        return index_file

    @classmethod
    def load(
        cls, path: Path, entry_size: int, files: FileOps = OS_FILES
    ) -> tuple[IndexFile, bytes]:
        """Read an existing file; raises FileNotFoundError, CorruptIndexError on a partial entry."""
        data = path.read_bytes()
        if len(data) % entry_size:
            raise CorruptIndexError(f"{path}: size {len(data)} is not a multiple of {entry_size}")
        index_file = cls(path, entry_size, files)
        index_file._written_entries = len(data) // entry_size
        return index_file, data

    def stage(self, entry: bytes) -> None:
        self._staged += entry

    def write_staged(self, at_least: int = 1) -> None:
        """Write the staged entries if there are `at_least` bytes of them."""
        if len(self._staged) < at_least:
            return
        with self._opened() as fd:
            self._write(fd)

    def _write(self, fd: int) -> None:
        if not self._staged:
            return
        data = bytes(self._staged)  # small; a live memoryview would pin the bytearray's size
        if self._torn:  # cut what a failed write left before writing after it
            self._files.truncate(fd, self._written_entries * self.entry_size)
            self._torn = False
        try:
            self._files.write_fully(fd, data)
        except BaseException:
            self._torn = True
            raise
        self._staged.clear()
        self._written_entries += len(data) // self.entry_size
        self._unsynced = True

    def truncate_entries(self, count: int) -> None:
        """Keep exactly the first `count` entries (staged ones included), cutting whatever a
        failed write left (also the undo of a failed append). Touches the file only when it
        holds more than that (written or torn), so an undo never needs a descriptor it may not
        get (EMFILE) when nothing was written."""
        if count >= self._written_entries and not self._torn:
            del self._staged[(count - self._written_entries) * self.entry_size :]
            return
        kept = self._staged[: max(0, count - self._written_entries) * self.entry_size]
        with self._opened() as fd:
            self._files.truncate(fd, min(count, self._written_entries) * self.entry_size)
        self._staged = bytearray(kept)
        self._written_entries = min(count, self._written_entries)
        self._torn = False
        self._unsynced = True

    def flush(self) -> None:
        """Write what is staged and fsync."""
        if not self._staged and not self._unsynced:
            return
        with self._opened() as fd:
            self._write(fd)
            self._files.fsync(fd)
        self._unsynced = False

    def close(self) -> None:
        """Write what is staged (the file holds every entry from now on)."""
        self.write_staged()

    def materialize(self) -> None:
        """Make the file if it is not made yet (its segment holds data), with what is staged."""
        if not self._made:
            with self._opened() as fd:
                self._write(fd)

    def release(self) -> None:
        """Forget what is staged without writing it (the log is released: nothing is written
        any more; its next start recovers the segment if it was not closed cleanly)."""
        self._staged.clear()

    def rename(self, path: Path) -> None:
        if self._made and self.path.exists():
            self._files.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self._staged.clear()
        self._files.unlink(self.path)

    @contextmanager
    def _opened(self) -> Iterator[int]:
        """A descriptor for one call, closed after it (module doc)."""
        fd = self._files.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self._made = True
        try:
            yield fd
        finally:
            os.close(fd)


class IndexFileOwner:
    """The file operations both sparse indexes pass straight to their `IndexFile`."""

    _file: IndexFile

    @property
    def path(self) -> Path:
        return self._file.path

    def write_staged(self, at_least: int = 1) -> None:
        self._file.write_staged(at_least)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def materialize(self) -> None:
        self._file.materialize()

    def release(self) -> None:
        self._file.release()

    def rename(self, path: Path) -> None:
        self._file.rename(path)

    def delete(self) -> None:
        self._file.delete()
