"""The embedded remote store: a local directory (Kafka's LocalTieredStorage, which its tests use).

Owns: the layout `<root>/<topic>-<partition>/<start offset>-<segment id>.<suffix>` (suffixes:
`log`, `index`, `timeindex`, `txnindex`, `snapshot`, `leader-epoch-checkpoint`). Objects are
written to a temporary name, fsynced and renamed, so a reader never sees half an object. The root
must exist (created when the store is built): a root that vanished or became a file makes every
call fail with RemoteStorageError, which is how tests take this store down. Blocking; thread-safe
(each call works on its own files).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from brokers.tiered.segment_metadata import RemoteSegment
from brokers.tiered.store import IndexKind, PacedReader, RemoteStorageError, SegmentFiles

_SUFFIXES = ("log", *(kind.value for kind in IndexKind))


class LocalDirStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, segment: RemoteSegment, suffix: str) -> Path:
        return self.root / f"{segment.object_name}.{suffix}"

    def copy_segment(self, segment: RemoteSegment, files: SegmentFiles) -> None:
        try:
            if not self.root.is_dir():
                raise OSError(f"remote store root {self.root} is not a directory")
            self._path(segment, "log").parent.mkdir(exist_ok=True)
            for suffix, source in files.objects():
                self._write(self._path(segment, suffix), source, files.max_bytes_per_second)
        except OSError as exc:
            raise RemoteStorageError(f"copy of {segment.object_name} failed: {exc}") from exc

    @staticmethod
    def _write(target: Path, source: Path | bytes, rate: int | None) -> None:
        temporary = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            with open(temporary, "wb") as out:
                if isinstance(source, bytes):
                    out.write(source)
                else:
                    with open(source, "rb") as data:
                        shutil.copyfileobj(PacedReader(data, rate), out, 1 << 16)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)

    def fetch_segment(self, segment: RemoteSegment, start: int, end: int) -> bytes:
        try:
            with open(self._path(segment, "log"), "rb") as data:
                return os.pread(data.fileno(), max(end - start, 0), start)
        except OSError as exc:
            raise RemoteStorageError(f"read of {segment.object_name} failed: {exc}") from exc

    def fetch_index(self, segment: RemoteSegment, kind: IndexKind) -> bytes:
        try:
            return self._path(segment, kind.value).read_bytes()
        except OSError as exc:
            raise RemoteStorageError(f"read of {segment.object_name} failed: {exc}") from exc

    def delete_segment(self, segment: RemoteSegment) -> None:
        try:
            if not self.root.is_dir():
                raise OSError(f"remote store root {self.root} is not a directory")
            for suffix in _SUFFIXES:
                self._path(segment, suffix).unlink(missing_ok=True)
            partition_dir = self._path(segment, "log").parent
            if partition_dir.is_dir():  # a copy killed mid-write leaves its temporary file
                for leftover in partition_dir.glob(
                    f"{segment.object_name.rpartition('/')[2]}.*.tmp"
                ):
                    leftover.unlink(missing_ok=True)
        except OSError as exc:
            raise RemoteStorageError(f"delete of {segment.object_name} failed: {exc}") from exc

    def close(self) -> None:
        return None
