"""The remote store's interface (Kafka's RemoteStorageManager) and what one copy hands it.

Owns: `SegmentFiles` (a closed segment's `.log`, `.index`, `.timeindex`, `.txnindex`, the producer
snapshot at its end and the leader-epoch entries inside it), `IndexKind` (the objects stored
beside the data, by file suffix), `RemoteStorageError` (anything the store failed at: the caller
retries later and never deletes local data meanwhile) and `RemoteStore`, the protocol the local
directory store and the S3 store satisfy. Every method blocks: callers run them on a worker thread
(`asyncio.to_thread`), never on the event loop. Implementations must be safe to call from several
threads at once.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from brokers.tiered.segment_metadata import RemoteSegment


class RemoteStorageError(Exception):
    """The remote store could not do what was asked (down, refused, object missing)."""


class IndexKind(enum.Enum):
    OFFSET = "index"
    TIMESTAMP = "timeindex"
    TRANSACTION = "txnindex"
    PRODUCER_SNAPSHOT = "snapshot"
    LEADER_EPOCH = "leader-epoch-checkpoint"


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    log: Path
    offset_index: Path
    time_index: Path
    txn_index: Path | None  # absent when the segment never had an aborted transaction
    producer_snapshot: Path | None
    leader_epochs: bytes  # the checkpoint's entries for this segment, as text
    max_bytes_per_second: int | None = None  # remote.log.manager.copy.max.bytes.per.second

    def objects(self) -> list[tuple[str, Path | bytes]]:
        """(suffix, source) of every object one copy writes; the `.log` goes last, so a
        segment whose data object exists has all its indexes."""
        found: list[tuple[str, Path | bytes]] = [
            (IndexKind.OFFSET.value, self.offset_index),
            (IndexKind.TIMESTAMP.value, self.time_index),
            (IndexKind.TRANSACTION.value, self.txn_index or b""),
            (IndexKind.PRODUCER_SNAPSHOT.value, self.producer_snapshot or b""),
            (IndexKind.LEADER_EPOCH.value, self.leader_epochs),
        ]
        return [*found, ("log", self.log)]


class PacedReader:
    """A file read no faster than `rate` bytes a second (the copy quota, Kafka's
    remote.log.manager.copy.max.bytes.per.second): `read` sleeps on the worker thread."""

    def __init__(self, source: BinaryIO, rate: int | None) -> None:
        self._source = source
        self._rate = rate
        self._started = time.monotonic()
        self._done = 0

    def read(self, size: int = -1) -> bytes:
        if self._rate is not None and size < 0:
            size = 1 << 16
        data = self._source.read(size)
        self._done += len(data)
        if self._rate is not None:
            ahead = self._done / self._rate - (time.monotonic() - self._started)
            if ahead > 0:
                time.sleep(ahead)
        return data


class RemoteStore(Protocol):
    def copy_segment(self, segment: RemoteSegment, files: SegmentFiles) -> None:
        """Write every object of the segment (idempotent: a retry overwrites)."""

    def fetch_segment(self, segment: RemoteSegment, start: int, end: int) -> bytes:
        """Bytes [start, end) of the segment's data (fewer when it ends sooner)."""

    def fetch_index(self, segment: RemoteSegment, kind: IndexKind) -> bytes: ...

    def delete_segment(self, segment: RemoteSegment) -> None:
        """Remove every object of the segment; objects already gone are not an error."""

    def close(self) -> None: ...
