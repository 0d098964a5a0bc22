"""The file system calls of the partition log, behind one seam (`FileOps`).

Owns: every call through which segments, indexes, producer snapshots and checkpoints change or
read files: open, write, writev, pread(v), ftruncate, fsync, rename/replace and unlink. `OS_FILES`
calls `os` directly; tests pass a subclass that fails the Nth call of a chosen operation
(`tests/unit/log/faulty_files.py`), which is how every step of an append is checked against a
full disk or an I/O error without filling a real disk. `write_atomically` (checkpoints, producer
snapshots) is built from those calls, so its every step can fail in tests too. Descriptors are plain ints, so the hot
path pays one method call per syscall and nothing else.

Stateless; thread-safe (the default implementation).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from typing_extensions import Buffer


class FileOps:
    """The default: straight `os` calls. Subclasses override single methods."""

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def write(self, fd: int, data: Buffer) -> int:
        return os.write(fd, data)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        return os.pwritev(fd, buffers, position)

    def pread(self, fd: int, size: int, position: int) -> bytes:
        return os.pread(fd, size, position)

    def preadv(self, fd: int, buffers: Sequence[bytearray | memoryview], position: int) -> int:
        return os.preadv(fd, buffers, position)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def rename(self, source: Path, target: Path) -> None:
        """Atomic rename over `target` (os.replace)."""
        os.replace(source, target)

    def unlink(self, path: Path) -> None:
        """Remove `path`; a missing file is not an error."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def fsync_directory(self, directory: Path) -> None:
        """Make renames and creations in `directory` durable."""
        fd = self.open(directory, os.O_RDONLY)
        try:
            self.fsync(fd)
        finally:
            os.close(fd)

    def write_fully(self, fd: int, data: Buffer) -> None:
        """`write` until every byte is out (resumes short writes)."""
        view = memoryview(data).cast("B")
        while view:
            view = view[self.write(fd, view) :]


OS_FILES = FileOps()


def write_atomically(files: FileOps, path: Path, data: bytes, *, sync: bool = True) -> None:
    """`data` to `<path>.tmp`, fsync, rename over `path`, fsync the directory. On failure the
    `.tmp` is removed (best effort) and the OSError raised: `path` is the old file, or already the
    new one when only the directory fsync failed. `sync=False` leaves out both fsyncs (the
    caller fsyncs the file and the directory later, elsewhere: `fsync_paths`)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = files.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            files.write_fully(fd, data)
            if sync:
                files.fsync(fd)
        finally:
            os.close(fd)
        files.rename(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            files.unlink(tmp)
        raise
    if sync:
        files.fsync_directory(path.parent)


def fsync_paths(files: FileOps, paths: Sequence[Path], directory: Path | None) -> None:
    """fsync each file through a descriptor of its own (a file renamed or deleted meanwhile is
    skipped: retention or a truncation took it), then `directory` when given."""
    for path in paths:
        try:
            fd = files.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            files.fsync(fd)
        finally:
            os.close(fd)
    if directory is not None:
        files.fsync_directory(directory)
