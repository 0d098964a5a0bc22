"""The ordered segments of one partition and their pending deletions (Kafka's LogSegments).

Owns: the segment list sorted by base offset (floor lookups by bisect), the last one being the
active segment; removal in Kafka's two steps (every file of the segment, `.txnindex` included,
renamed `.deleted` now, unlinked once `file.delete.delay.ms` has passed, as Kafka does; a
`FileRegion` already handed to a fetch holds its file open past that for as long as the answer
waits, file_records' `FileHandle`), also when compaction swaps consecutive segments for their
cleaned copy (`replace`); fsync of a range of segments and of the directory when segment files
were created since the last one. Only the active segment holds its read descriptor; a segment
that becomes inactive, or is closed, drops its hold: the descriptor closes once no region holds
it either, and an inactive segment's reads open it on demand (file_records).

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from pathlib import Path

from brokers.log.file_ops import OS_FILES, FileOps
from brokers.log.segment import LogSegment


class LogSegments:
    def __init__(
        self, directory: Path, segments: list[LogSegment], files: FileOps = OS_FILES
    ) -> None:
        self.directory = directory
        self._files = files
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._pending_deletes: list[tuple[int, LogSegment]] = []  # (due ms, segment)
        self._directory_dirty = False

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(tuple(self._segments))

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def first(self) -> LogSegment:
        return self._segments[0]

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    def snapshot(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    def holding_and_after(self, offset: int) -> list[LogSegment]:
        """The segment whose range holds `offset` (the first if below all) and every later one."""
        return self._segments[max(bisect_right(self._bases, offset) - 1, 0) :]

    def add(self, segment: LogSegment) -> None:
        if self._segments and segment.base_offset <= self._bases[-1]:
            raise ValueError(f"segment {segment.base_offset} is not after {self._bases[-1]}")
        if self._segments:  # no longer active (a roll has already made it let go)
            self._segments[-1].records.release_reader()
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        self._directory_dirty = True

    def drop_empty_active(self) -> None:
        """Delete the (empty, so unread) active segment at once, e.g. to re-base it."""
        self.drop_active()

    def drop_active(self) -> None:
        """Delete the active segment's files at once: it is empty, or holds only an append being
        undone, which nobody has read (appends and reads share the event loop)."""
        self._bases.pop()
        self._segments.pop().delete_files()
        self._last_is_active()

    def remove(self, doomed: Sequence[LogSegment], due_ms: int) -> None:
        """Take segments out of the log and rename their files; unlink them at `due_ms`."""
        ids = {id(segment) for segment in doomed}
        self._segments = [s for s in self._segments if id(s) not in ids]
        self._bases = [s.base_offset for s in self._segments]
        for segment in doomed:
            segment.rename_to_deleted()
            self._pending_deletes.append((due_ms, segment))
        self._last_is_active()

    def _last_is_active(self) -> None:
        """After later segments went (a follower's truncation, an undone roll), the last one is
        active again: it holds its read descriptor from its next read on (file_records)."""
        if self._segments:
            self._segments[-1].records.keep_reader()

    def replace(self, new: LogSegment, old: Sequence[LogSegment], due_ms: int) -> None:
        """Compaction's swap: `new` takes the place of the consecutive, non-active segments `old`
        (same base offset); `old` are renamed `.deleted` and unlinked at `due_ms`."""
        start = next((i for i, s in enumerate(self._segments) if s is old[0]), -1) if old else -1
        end = start + len(old)
        if (
            start < 0
            or end >= len(self._segments)
            or any(self._segments[start + i] is not s for i, s in enumerate(old))
            or new.base_offset != old[0].base_offset
        ):
            raise ValueError("replaced segments must be consecutive, present and not active")
        self._segments[start:end] = [new]
        self._bases[start:end] = [new.base_offset]
        for segment in old:
            segment.rename_to_deleted()
            self._pending_deletes.append((due_ms, segment))
        self._directory_dirty = True

    def delete_expired_files(self, now_ms: int, *, everything: bool = False) -> int:
        due = self.take_expired(now_ms, everything=everything)
        for segment in due:
            segment.delete_files()
        return len(due)

    def take_expired(self, now_ms: int, *, everything: bool = False) -> list[LogSegment]:
        """The `.deleted` segments whose delay passed, no longer pending (the caller deletes)."""
        due = [s for t, s in self._pending_deletes if everything or t <= now_ms]
        self._pending_deletes = [
            (t, s) for t, s in self._pending_deletes if not (everything or t <= now_ms)
        ]
        return due

    def files_holding(self, from_offset: int, to_offset: int) -> tuple[list[Path], bool]:
        """The files of every segment holding offsets in [from_offset, to_offset), and whether
        the directory needs an fsync (taken: the caller syncs it), for an fsync elsewhere."""
        paths = [
            path
            for segment in self._segments
            if segment.base_offset < to_offset and segment.next_offset > from_offset
            for path in segment.file_paths()
        ]
        dirty, self._directory_dirty = self._directory_dirty, False
        return paths, dirty

    def flush(self, from_offset: int, to_offset: int) -> None:
        """fsync every segment holding offsets in [from_offset, to_offset), then the directory."""
        for segment in self._segments:
            if segment.base_offset < to_offset and segment.next_offset > from_offset:
                segment.flush()
        if self._directory_dirty:
            self._files.fsync_directory(self.directory)
            self._directory_dirty = False

    def forget_staged_indexes(self) -> None:
        """Drop the index entries not written yet, writing nothing (the log is being deleted:
        an `open` now could meet a full descriptor table, and the directory is renamed)."""
        for segment in self._segments:
            segment.offset_index.release()
            segment.time_index.release()

    def retire(self) -> None:
        """The log is being deleted: write nothing more and let go of every descriptor. One a
        region in flight still holds stays open until that region is dropped (file_records),
        the others close now, so a full descriptor table gets them back at once (the deletion
        itself then needs one, for the log dir's fsync)."""
        self.forget_staged_indexes()
        for segment in self._segments:
            segment.records.release_reader()

    def release(self) -> None:
        """Close every descriptor and unlink every pending `.deleted` file."""
        self.forget_staged_indexes()
        for segment in self._segments:
            segment.records.close()
        self.delete_expired_files(0, everything=True)
