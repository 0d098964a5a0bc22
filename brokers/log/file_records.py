"""The `.log` file of one segment: whole batches appended, scanned and sliced (Kafka's FileRecords).

Owns: the segment's file descriptor, `FileHandle` and `FileRegion`, the (file, position, size)
slice that fetch sends with `sendfile`. The active segment holds one read-write descriptor, as
Kafka holds one per segment file: appends are one `os.pwritev` at the file's end per append
(split only past IOV_MAX buffers, short writes resumed; a failed write is rolled back so the file
never keeps half a batch; `restore_size` is the segment's undo of a failed append), reads are
`os.pread` and `sendfile` at explicit positions, so nothing depends on the descriptor's offset.
The descriptor is owned by a `FileHandle`; every region handed out holds the handle too, so the
descriptor closes when the last of its holders lets go (CPython's reference counting: at once, on
whichever thread drops the last reference) and never while a region still names it. A region
queued behind a slow client therefore reads its own file — after a roll, a truncation of later
data, a rename to `.deleted` (why Kafka deletes asynchronously) or the final unlink — and never
the file that took over a closed descriptor's number (another tenant's segment, docs/security.md
F3).

Who holds the descriptor. The active segment's file holds its handle (`keep_reader`). An
inactive one (`release_reader`, at a roll, or a loaded segment below the active one) holds none:
that is what keeps a partition's cost at the 1 descriptor the broker's budget promises it however
many times it rolls (brokers/common/descriptors.py). A read of an inactive segment opens its file
read-only on demand; the handle is shared, through a weak reference, with every reader and region
that still holds it, so a scan, its region and the next fetch of the same segment while that
region is queued use one descriptor, and it closes when the last of them is done (~6 µs more per
cold read: one `open` and one `close`, docs/broker-config.md). A write to an inactive segment
(recovery, a truncation) opens a write descriptor for the call and closes it again. A segment
made active again (the undo of a failed roll) whose shared handle is read-only reopens its file
read-write at its next write and holds that instead. Opening fails with `StorageError` when the
descriptor table is full (EMFILE, ENFILE): nothing was touched, so the read is refused and the log
stays online. `close`/`delete` drop the segment's reference; they close nothing a region still
uses. Header scans read in chunks, so walking small batches costs few syscalls. Every call goes
through the `FileOps` seam (file_ops), so tests can fail any one of them.

Runs on the event loop; not thread-safe. `FileHandle` and `FileRegion` are thread-safe to read
(never changed after creation); a handle's close (a `weakref.finalize`) runs exactly once, on
the thread that drops the last reference (the writer thread's, for an answer it wrote), after
every weak reference to it reads None, so the on-demand sharing never hands out a closed number.
"""

from __future__ import annotations

import contextlib
import errno
import os
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from typing_extensions import Buffer

from brokers.log.errors import CorruptLogError, StorageError
from brokers.log.file_ops import OS_FILES, FileOps
from brokers.records.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, parse_header
from brokers.records.errors import RecordError

_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024
SCAN_CHUNK = 16 * 1024
_MIN_BATCH_SIZE = HEADER_SIZE
_TABLE_FULL = (errno.EMFILE, errno.ENFILE)  # no descriptor to open one more with


class FileHandle:
    """An open descriptor that closes once nothing refers to the handle any more. Holders use
    `fd` only while they hold the handle, so the number can never name another file for them."""

    __slots__ = ("__weakref__", "_closer", "fd", "writable")

    def __init__(self, fd: int, *, writable: bool = False) -> None:
        self.fd = fd
        self.writable = writable  # opened O_RDWR: the active segment's appends use it too
        self._closer = weakref.finalize(self, _close_quietly, fd)
        self._closer.atexit = False  # at exit the process closes it; never under a holder


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


@dataclass(frozen=True, slots=True)
class FileRegion:
    """`size` bytes of a segment file starting at `position` (what fetch sends). It holds the
    file open: a sender keeps the region itself, not its `fd`, for as long as it sends."""

    file: FileHandle
    position: int
    size: int

    @property
    def fd(self) -> int:
        return self.file.fd

    def read(self) -> bytes:
        """The region's bytes via pread (for transports without sendfile, and tests)."""
        chunks: list[bytes] = []
        position, left = self.position, self.size
        while left > 0:
            chunk = os.pread(self.fd, left, position)
            if not chunk:
                break  # the file was truncated under the region: return what is left
            chunks.append(chunk)
            position += len(chunk)
            left -= len(chunk)
        return b"".join(chunks)


class FileRecords:
    def __init__(self, path: Path, fd: int, size: int, files: FileOps = OS_FILES) -> None:
        """`fd`, opened read-write, becomes the file's held handle (the segment starts active,
        `keep_reader`)."""
        self.path = path
        self.size = size
        self._held: FileHandle | None = FileHandle(fd, writable=True)  # while the segment keeps it
        self._shared: weakref.ref[FileHandle] | None = None  # the last handle opened, if alive
        self._keep = True  # hold the handle (the active segment), or open it on demand
        self._closed = False
        self._files = files

    @classmethod
    def open(cls, path: Path, *, create: bool = False, files: FileOps = OS_FILES) -> FileRecords:
        """One read-write descriptor (`create`: a new, empty file)."""
        flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
        fd = files.open(path, flags)
        try:
            size = os.fstat(fd).st_size
        except OSError:
            os.close(fd)
            raise
        return cls(path, fd, size, files)

    def reader(self) -> FileHandle:
        """The descriptor's handle, for as long as the caller holds it: the held one, the one a
        reader or region of this file still holds, or a new one (module doc). Raises
        StorageError when the descriptor table is full, OSError(EBADF) once closed."""
        if self._held is not None:
            return self._held
        if self._closed:
            raise OSError(errno.EBADF, f"{self.path}: the segment is closed")
        handle = self._shared() if self._shared is not None else None
        if handle is None:
            handle = self._open_handle(writable=self._keep)
        if self._keep:
            self._held = handle
        return handle

    def _open_handle(self, *, writable: bool) -> FileHandle:
        """A new handle on the file, shared with later on-demand readers (module doc)."""
        try:
            fd = self._files.open(self.path, os.O_RDWR if writable else os.O_RDONLY)
        except OSError as exc:
            if exc.errno in _TABLE_FULL:
                raise StorageError(
                    f"{self.path.name}: no descriptor to open it with ({exc.strerror})"
                ) from exc
            raise
        handle = FileHandle(fd, writable=writable)
        self._shared = weakref.ref(handle)
        return handle

    def keep_reader(self) -> None:
        """Hold the descriptor from the next read or write on (the segment is active again)."""
        self._keep = True

    def release_reader(self) -> None:
        """Stop holding the descriptor (the segment became inactive): it closes now, or once the
        last region or reader holding it lets go; later reads open the file on demand."""
        if self._held is not None:
            self._shared = weakref.ref(self._held)
            self._held = None
        self._keep = False

    @property
    def reader_held(self) -> bool:
        """Whether the segment itself holds a descriptor open."""
        return self._held is not None

    def append(self, parts: Sequence[Buffer]) -> int:
        """Append `parts` back to back at the file's end; returns the bytes written."""
        views = [memoryview(part).cast("B") for part in parts]
        total = sum(view.nbytes for view in views)
        file = self._writer()
        try:
            _write_all(self._files, file.fd, views, self.size)
        except BaseException:
            self._files.truncate(file.fd, self.size)  # if this fails too, the caller's undo retries
            raise
        self.size += total
        return total

    def restore_size(self, size: int) -> None:
        """Cut the file back to `size` whatever it holds past it (undo of a failed append).
        Without a held read-write descriptor nothing was written through this file, so at its
        own size there is nothing to cut (an append whose descriptor could not be opened,
        EMFILE, is refused and the log stays online instead of failing the undo the same way)."""
        if size == self.size and not self._writes_here():
            return
        self._files.truncate(self._writer().fd, size)
        self.size = size

    def _writes_here(self) -> bool:
        return self._held is not None and self._held.writable

    # A handle is held in a local for the whole call: `self.reader().fd` alone would drop an
    # on-demand handle, and close its number, before the call used it.

    def pread(self, position: int, size: int) -> bytes:
        file = self.reader()
        return self._files.pread(file.fd, size, position)

    def read_into(self, buffer: bytearray | memoryview, position: int) -> int:
        file = self.reader()
        return self._files.preadv(file.fd, [buffer], position)

    def region(self, position: int, size: int, file: FileHandle | None = None) -> FileRegion:
        """A region of this file, holding `file` (a handle from `reader`) or the reader's."""
        return FileRegion(self.reader() if file is None else file, position, size)

    def headers(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch starting in [start, end); raises CorruptLogError."""
        limit = self.size if end is None else min(end, self.size)
        chunk, chunk_start = b"", start
        position = start
        if position >= limit:
            return
        file = self.reader()  # held for the whole scan: one descriptor, opened once if cold
        while position < limit:
            if position + HEADER_SIZE > chunk_start + len(chunk):
                chunk_start = position
                chunk = self._files.pread(file.fd, max(SCAN_CHUNK, HEADER_SIZE), position)
            header = self._parse(chunk, position - chunk_start, position)
            yield position, header
            position += header.size

    def _parse(self, chunk: bytes, at: int, position: int) -> BatchHeader:
        try:
            header = parse_header(chunk, at)
        except RecordError as exc:
            raise CorruptLogError(f"{self.path}: {exc} (file position {position})") from exc
        if (
            header.batch_length < _MIN_BATCH_SIZE - LOG_OVERHEAD
            or position + header.size > self.size
        ):
            raise CorruptLogError(f"{self.path}: bad batch length at file position {position}")
        return header

    def truncate_to(self, size: int) -> None:
        if size < self.size:
            file = self._writer()
            self._files.truncate(file.fd, size)
            self.size = size

    def flush(self) -> None:
        """fsync the file (an inactive one through a descriptor opened for the call)."""
        file = self.reader()
        self._files.fsync(file.fd)

    def close(self) -> None:
        """Drop the segment's hold on its file: the descriptor closes now, or when the last
        region handed out of it is dropped (a fetch answer still queued)."""
        self.release_reader()  # the handle's finalizer closes the descriptor once unreferenced
        self._closed = True

    def rename(self, path: Path) -> None:
        self._files.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.close()
        self._files.unlink(self.path)

    def _writer(self) -> FileHandle:
        """A read-write handle: the held one; for a segment made active again whose shared
        handle is read-only, a new one it holds from now on; for an inactive segment, one for
        the caller's call only (module doc). Raises StorageError when the table is full."""
        held = self._held
        if held is not None and held.writable:
            return held
        if self._closed:
            raise OSError(errno.EBADF, f"{self.path}: the segment is closed")
        handle = self._open_handle(writable=True)
        if self._keep:
            self._held = handle
        return handle


def _write_all(files: FileOps, fd: int, views: list[memoryview], position: int) -> None:
    """pwritev everything from `position`, IOV_MAX buffers at a time, resuming short writes."""
    first = 0
    while first < len(views):
        written = files.pwritev(fd, views[first : first + _IOV_MAX], position)
        position += written
        while first < len(views) and written >= views[first].nbytes:
            written -= views[first].nbytes
            first += 1
        if written:
            views[first] = views[first][written:]
