"""The file behind a segment index: fixed-size entries, appended, truncated, renamed, deleted.

Owns: the bytes on disk of `.index` and `.timeindex` files (Kafka's AbstractIndex without the
mmap). Entries live in memory in the index classes; this class only persists them. New entries are
staged and written with one `os.write` per segment append (`write_staged`), so many small batches
cost one syscall, not one per entry. The file is never preallocated: its size is always a whole
number of entries, which is what the load-time sanity check relies on; `restore_entries` (the
undo of a failed append) cuts the file back to a whole number of entries even after a torn write.
Every call goes through the `FileOps` seam (file_ops).

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import os
from pathlib import Path

from brokers.log.errors import CorruptIndexError
from brokers.log.file_ops import OS_FILES, FileOps


class IndexFile:
    def __init__(self, path: Path, entry_size: int, files: FileOps = OS_FILES) -> None:
        self.path = path
        self.entry_size = entry_size
        self._files = files
        self._fd: int | None = None
        self._staged = bytearray()
        self._written_entries = 0
        self._unsynced = False

    @classmethod
    def create(cls, path: Path, entry_size: int, files: FileOps = OS_FILES) -> IndexFile:
        """A new, empty index file (an existing one is emptied)."""
        index_file = cls(path, entry_size, files)
        index_file._fd = files.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC)
        return index_file

    @classmethod
    def load(
        cls, path: Path, entry_size: int, files: FileOps = OS_FILES
    ) -> tuple[IndexFile, bytes]:
        """Open an existing file; raises FileNotFoundError, CorruptIndexError on a partial entry."""
        data = path.read_bytes()
        if len(data) % entry_size:
            raise CorruptIndexError(f"{path}: size {len(data)} is not a multiple of {entry_size}")
        index_file = cls(path, entry_size, files)
        index_file._written_entries = len(data) // entry_size
        return index_file, data

    def stage(self, entry: bytes) -> None:
        self._staged += entry

    def write_staged(self) -> None:
        if not self._staged:
            return
        fd = self._writer()
        data = bytes(self._staged)  # small; a live memoryview would pin the bytearray's size
        self._staged.clear()
        self._files.write_fully(fd, data)
        self._written_entries += len(data) // self.entry_size
        self._unsynced = True

    def truncate_entries(self, count: int) -> None:
        """Keep the first `count` entries (staged ones included)."""
        if count >= self._written_entries:
            del self._staged[(count - self._written_entries) * self.entry_size :]
            return
        self._staged.clear()
        self._files.truncate(self._writer(), count * self.entry_size)
        self._written_entries = count
        self._unsynced = True

    def restore_entries(self, count: int) -> None:
        """Keep exactly `count` entries in the file, cutting whatever a failed write left."""
        self._staged.clear()
        self._files.truncate(self._writer(), count * self.entry_size)
        self._written_entries = count
        self._unsynced = True

    def flush(self) -> None:
        """Write what is staged and fsync, even when the descriptor was already released."""
        was_open = self._fd is not None
        self.write_staged()
        if self._unsynced:
            self._files.fsync(self._writer())
            self._unsynced = False
        if not was_open:
            self.close()

    @property
    def descriptor_open(self) -> bool:
        """Whether the file's write descriptor is open now (it opens at a write)."""
        return self._fd is not None

    def close(self) -> None:
        """Write what is staged and release the descriptor; reopened lazily on the next write."""
        if self._fd is None and not self._staged:
            return
        self.write_staged()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename(self, path: Path) -> None:
        if self.path.exists():
            self._files.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self._staged.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._files.unlink(self.path)

    def _writer(self) -> int:
        if self._fd is None:
            self._fd = self._files.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        return self._fd


class IndexFileOwner:
    """The file operations both sparse indexes pass straight to their `IndexFile`."""

    _file: IndexFile

    def write_staged(self) -> None:
        self._file.write_staged()

    @property
    def descriptor_open(self) -> bool:
        return self._file.descriptor_open

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def rename(self, path: Path) -> None:
        self._file.rename(path)

    def delete(self) -> None:
        self._file.delete()
