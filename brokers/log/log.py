"""One partition's log: `<log.dir>/<topic>-<partition>/` as a list of segments (Kafka's UnifiedLog).

Owns: the partition's offsets (log start, log end, recovery point), appends as leader (offsets and
leader epoch assigned by patching each 61-byte header: both fields sit outside the CRC, KIP-98, so
batch bodies are written straight from the request buffer with one writev) and as follower (bytes
written as received), reads of whole batches, timestamp lookups, truncation, DeleteRecords,
retention, rolls, flushes, compaction's swap of cleaned segments (`replace_segments`, called by
the cleaner) and the two-step deletion of segments. Producer state and the leader
epoch cache are kept in step with every append, truncation and deletion.

Transactions (KIP-98): the leader writes the coordinator's COMMIT/ABORT markers
(`append_marker`, fenced on producer and coordinator epochs); a follower's control batches are
read (one record each) as they are appended. Either way producer state learns the outcome and
an ABORT that ends a transaction adds an `AbortedTxn` to the active segment's `.txnindex`
within the same all-or-nothing append. `last_stable_offset(hw)` / `first_unstable_offset()`
come from producer state in O(unstable transactions); `collect_aborted` reads the `.txnindex`
of the segments from the fetch offset on. Data batches are never parsed for any of this.

Loading and recovery live in log_loader, the segment list and its delayed deletes in
log_segments, the retention rules in retention, header patching in offset_assignment.
A roll's producer snapshot is written without an fsync and fsynced with the rolled segment off
the loop (`rolled_files`), or by a flush or clean close on it, before the recovery point passes
it. `high_watermark` is set by replication; retention and DeleteRecords never go past it (None: no
replication, the log end). Segments removed while the log is live are renamed `.deleted` and
unlinked by `delete_expired_segment_files` after `file.delete.delay.ms`; an in-flight
`FileRegion` holds its file open however long it waits (file_records' `FileHandle`).

Storage failures (docs/storage-errors.md): file calls go through the `FileOps` given to `open`.
An append failing at any step (roll, producer snapshot, `.log`, either index, epoch checkpoint) is
undone (append_undo) and raises StorageError: the log is as before, so appends work again once
space is back; producer state and the log end take an append only once all of it is written. A
failed undo, fsync, truncation, read or compaction swap takes the log offline (storage_health):
LogOfflineError until restart, nothing more written, and recovery keeps each batch once or not
at all. Kafka takes the whole log dir offline; Pier the one partition.

`assign_epochs_together`: a produce request whose partitions each start a new leader epoch (the
first appends to a new topic's partitions) writes those epochs' checkpoints in one batch
(`leader_epoch_cache.batched_writes`, fsyncs in flight at once) before any data, instead of two
fsyncs per partition one after the other on the loop (~10 ms each: a 100-partition request held
the loop for over a second). Epochs still go before data, as Kafka's makeLeader assigns them.

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from typing_extensions import Buffer

from brokers.common.clock import Clock
from brokers.log.append_undo import AppendMark, undo_append
from brokers.log.config import LogConfig
from brokers.log.errors import LogClosedError, LogDirError, OffsetOutOfRangeError, StorageError
from brokers.log.file_ops import OS_FILES, FileOps
from brokers.log.file_records import FileRegion
from brokers.log.leader_epoch_cache import CHECKPOINT_NAME, LeaderEpochCache, batched_writes
from brokers.log.log_loader import create_segment, load_log, roll_jitter_ms
from brokers.log.log_segments import LogSegments
from brokers.log.offset_assignment import AssignedBatches, assign_offsets, check_follower_batches
from brokers.log.producer_replay import load_producer_state, replay
from brokers.log.producer_state.manager import DEFAULT_MAX_PRODUCERS, ProducerStateManager
from brokers.log.retention import deletable_segment_count
from brokers.log.segment import LogSegment
from brokers.log.storage_health import StorageHealth, brief
from brokers.log.txn_index import AbortedTxn
from brokers.records.batch import CONTROL_MASK, BatchHeader, parse_header
from brokers.records.control import EndTxnMarker, build_marker_batch, read_marker
from brokers.records.errors import RecordTooLargeError

NO_TIMESTAMP = -1
_log = logging.getLogger(__name__)


@dataclass(slots=True)  # not frozen: one per partition appended, built 6x faster
class AppendResult:
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int  # -1 for CreateTime
    log_start_offset: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches from one segment; `region` is None for an empty read."""

    region: FileRegion | None
    first_offset: int  # base offset of the first batch returned (the fetch offset if empty)
    next_offset: int  # offset after the last batch returned
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class RolledFiles:
    """An fsync of a log's rolled segments and roll snapshots planned off the loop."""

    target: int  # the offset the recovery point may move to once they are synced
    paths: list[Path]
    directory: bool  # the directory needs its fsync too
    truncations: int  # the log's truncations when planned (none meanwhile, or it is void)


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    offset: int
    timestamp: int
    leader_epoch: int | None


def parse_topic_partition(directory: Path) -> tuple[str, int]:
    topic, sep, partition = directory.name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise LogDirError(f"{directory} is not named <topic>-<partition>")
    return topic, int(partition)


class Log:
    def __init__(
        self, directory: Path, config: LogConfig, *, clock: Clock, segments: list[LogSegment],
        log_start_offset: int, log_end_offset: int, recovery_point: int,
        producer_state: ProducerStateManager, leader_epoch_cache: LeaderEpochCache,
        files: FileOps = OS_FILES,
    ) -> None:  # fmt: skip
        self.directory = directory
        self.topic, self.partition = parse_topic_partition(directory)
        self.config = config
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self.recovery_point = recovery_point
        self.producer_state = producer_state
        self.leader_epoch_cache = leader_epoch_cache
        self.high_watermark: int | None = None
        # Tiered storage (brokers/tiered): the offset after the last one in the remote tier;
        # local retention deletes only segments wholly below it (None: nothing copied).
        self.remote_copied_upto: int | None = None
        self.last_flush_ms = clock.time_ms()
        # Truncations so far: an fsync planned off the loop before one (`rolled_files`) no longer
        # covers what the log holds below its target, nor a snapshot rewritten at its path.
        self._truncations = 0
        self._clock = clock
        self._files = files
        self._segments = LogSegments(directory, segments, files)
        self._closed = False
        self.health = StorageHealth(self.topic, self.partition)

    @classmethod
    def open(
        cls, directory: Path, config: LogConfig, *, clock: Clock, recovery_point: int = 0,
        log_start_offset: int = 0, had_clean_shutdown: bool = False,
        producer_id_expiration_ms: int = 86400000, files: FileOps = OS_FILES,
        max_producers: int = DEFAULT_MAX_PRODUCERS,
    ) -> Log:  # fmt: skip
        parse_topic_partition(directory)
        directory.mkdir(parents=True, exist_ok=True)
        loaded = load_log(
            directory, config, clock=clock, recovery_point=recovery_point,
            log_start_offset=log_start_offset, had_clean_shutdown=had_clean_shutdown, files=files,
        )  # fmt: skip
        epochs = LeaderEpochCache(directory / CHECKPOINT_NAME, files)
        epochs.truncate_from_end(loaded.log_end_offset)
        epochs.truncate_from_start(loaded.log_start_offset)
        producers = ProducerStateManager(
            directory, clock=clock, producer_id_expiration_ms=producer_id_expiration_ms,
            files=files, max_producers=max_producers,
        )  # fmt: skip
        log = cls(
            directory, config, clock=clock, segments=loaded.segments,
            log_start_offset=loaded.log_start_offset, log_end_offset=loaded.log_end_offset,
            recovery_point=loaded.recovery_point, producer_state=producers,
            leader_epoch_cache=epochs, files=files,
        )  # fmt: skip
        load_producer_state(
            list(log.segments), producers, log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset, rebuild=loaded.recovered,
        )  # fmt: skip
        for segment in loaded.segments[:-1]:  # open while loading and replaying, then let go:
            segment.release_descriptors()  # only the active segment holds any (file_records)
        return log

    @classmethod
    def adopt_new(
        cls, directory: Path, config: LogConfig, log_fd: int, *, clock: Clock,
        producer_id_expiration_ms: int = 86400000, files: FileOps = OS_FILES,
        max_producers: int = DEFAULT_MAX_PRODUCERS,
    ) -> Log:  # fmt: skip
        """A new, empty log over files just made for it (`LogManager.prepare`): its directory,
        and its first segment's empty files with the `.log` open read-write as `log_fd` (taken
        here). Built as `open` would build it from them, with no system call: nothing to read."""
        parse_topic_partition(directory)
        segment = LogSegment.adopt_empty(
            directory, 0, log_fd, clock=clock, index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes, roll_jitter_ms=roll_jitter_ms(config),
            files=files,
        )  # fmt: skip
        producers = ProducerStateManager(
            directory, clock=clock, producer_id_expiration_ms=producer_id_expiration_ms,
            files=files, fresh=True, max_producers=max_producers,
        )  # fmt: skip
        return cls(
            directory, config, clock=clock, segments=[segment], log_start_offset=0,
            log_end_offset=0, recovery_point=0, producer_state=producers,
            leader_epoch_cache=LeaderEpochCache(directory / CHECKPOINT_NAME, files, fresh=True),
            files=files,
        )  # fmt: skip

    # -- state ------------------------------------------------------------------------------

    @property
    def segments(self) -> Sequence[LogSegment]:
        return self._segments.snapshot()

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active

    @property
    def descriptors_held(self) -> int:
        """How many of the descriptors the budget promises a partition (1) it holds now: its
        active segment's (an inactive one holds none; brokers/common/descriptors.py)."""
        return self.active_segment.descriptors_held

    @property
    def size_bytes(self) -> int:
        return self._segments.size_bytes

    @property
    def number_of_segments(self) -> int:
        return len(self._segments)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def offline(self) -> bool:
        """True after a storage failure that could not be undone (until restart)."""
        return self.health.offline

    def update_config(self, config: LogConfig) -> None:
        """New settings apply from the next append/roll; existing segments keep their indexes."""
        self.config = config

    # -- appends ----------------------------------------------------------------------------

    def append_as_leader(
        self, data: Buffer, batches: Sequence[tuple[int, BatchHeader]], *, leader_epoch: int
    ) -> AppendResult:
        """Append validated client batches; a retried duplicate returns its original offsets."""
        self._check_open()
        if not batches:
            return self._empty_append()
        self._check_size(batches)
        duplicates = self.producer_state.check_all([header for _, header in batches])
        duplicate = next((d for d in duplicates if d is not None), None)
        if duplicate is not None:
            return AppendResult(
                duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                duplicate.first_offset, NO_TIMESTAMP, self.log_start_offset, duplicate=True,
            )  # fmt: skip
        append_time = None
        if self.config.message_timestamp_type == "LogAppendTime":
            append_time = self._clock.time_ms()
        assigned = assign_offsets(
            data, batches, first_offset=self.log_end_offset, leader_epoch=leader_epoch,
            log_append_time_ms=append_time,
        )  # fmt: skip
        epochs = [(leader_epoch, assigned.headers[0].base_offset)] if leader_epoch >= 0 else []
        self._write(assigned, first_offset=self.log_end_offset, epochs=epochs)
        return self._appended(assigned, NO_TIMESTAMP if append_time is None else append_time)

    def append_as_follower(
        self, data: Buffer, batches: Sequence[tuple[int, BatchHeader]]
    ) -> AppendResult:
        """Append batches replicated from the leader, offsets and epochs as the leader set them."""
        self._check_open()
        if not batches:
            return self._empty_append()
        self._check_size(batches)
        assigned = check_follower_batches(data, batches, log_end_offset=self.log_end_offset)
        epochs = [
            (header.partition_leader_epoch, header.base_offset)
            for header in assigned.headers
            if header.partition_leader_epoch >= 0
        ]
        controls = [(p, h) for p, h in batches if h.attributes & CONTROL_MASK and h.records_count]
        markers = _markers_of(data, controls) if controls else None
        self._write(
            assigned, first_offset=assigned.headers[0].base_offset, epochs=epochs, markers=markers
        )
        return self._appended(assigned, NO_TIMESTAMP)

    def append_marker(
        self, producer_id: int, producer_epoch: int, marker: EndTxnMarker, *, leader_epoch: int
    ) -> AppendResult:
        """Write a COMMIT/ABORT marker as leader (for the transaction coordinator). Raises
        InvalidProducerEpochError / TransactionCoordinatorFencedError for an old producer /
        coordinator epoch; a producer with no open transaction here still gets its marker."""
        self._check_open()
        self.producer_state.check_marker(producer_id, producer_epoch, marker)
        now = self._clock.time_ms()
        batch = build_marker_batch(producer_id, producer_epoch, marker, timestamp_ms=now)
        append_time = now if self.config.message_timestamp_type == "LogAppendTime" else None
        first = self.log_end_offset
        assigned = assign_offsets(
            batch, [(0, parse_header(batch))], first_offset=first, leader_epoch=leader_epoch,
            log_append_time_ms=append_time,
        )  # fmt: skip
        epochs = [(leader_epoch, first)] if leader_epoch >= 0 else []
        self._write(assigned, first_offset=first, epochs=epochs, markers={first: marker})
        return self._appended(assigned, NO_TIMESTAMP if append_time is None else append_time)

    def _check_size(self, batches: Sequence[tuple[int, BatchHeader]]) -> None:
        size = sum(header.size for _, header in batches)
        if size > self.config.segment_bytes:
            # Kafka's RecordBatchTooLargeException: it could never fit in a segment.
            raise RecordTooLargeError(
                f"{size} bytes exceed segment.bytes {self.config.segment_bytes}"
            )

    def _write(
        self, assigned: AssignedBatches, *, first_offset: int, epochs: list[tuple[int, int]],
        markers: Mapping[int, EndTxnMarker] | None = None,
    ) -> None:  # fmt: skip
        """Assign epochs, roll if due, write, index; all or nothing (see the module docstring).
        Epochs go first, as in Kafka: a crash between them and the data leaves an epoch entry at
        the log end, which the next open drops, never data whose epoch is unknown. `markers`:
        the control batches' markers by offset (None when there are none, the usual case)."""
        last = assigned.headers[-1]
        mark = AppendMark.take(self._segments)
        try:
            for epoch, start_offset in epochs:
                self._assign_epoch(epoch, start_offset, mark)
            segment = self._maybe_roll(
                assigned.size, assigned.max_timestamp, first_offset, last.last_offset
            )
            segment.append(assigned.headers, assigned.parts)
            if markers:  # producer state is still as before the append: it is folded in below
                for txn in self.producer_state.aborted_by(assigned.headers, markers):
                    segment.txn_index.append(txn)
        except Exception as exc:
            self._undo(mark, exc)
        self.log_end_offset = last.next_offset
        if markers is None:
            for header in assigned.headers:
                if header.producer_id >= 0:
                    self.producer_state.update(header)
            return
        for header in assigned.headers:
            marker = markers.get(header.base_offset) if header.is_control else None
            self.producer_state.update(header, marker=marker)

    def _undo(self, mark: AppendMark, exc: Exception) -> NoReturn:
        """Put the log back to `mark` and raise: StorageError for an OSError, else `exc` itself;
        LogOfflineError when the undo fails too."""
        try:
            undo_append(
                mark, self._segments, make_segment=self._new_segment,
                epochs=self.leader_epoch_cache, producers=self.producer_state,
                log_start_offset=self.log_start_offset, log_end_offset=self.log_end_offset,
            )  # fmt: skip
        except OSError as undo_exc:
            reason = f"write failed ({brief(exc)}), undo failed ({brief(undo_exc)})"
            raise self.health.fail(reason, self.log_end_offset, undo_exc) from exc
        if not isinstance(exc, OSError):
            raise exc
        _log.warning(
            "event=append_undone topic=%s partition=%d log_end_offset=%d error=%r",
            self.topic, self.partition, self.log_end_offset, str(exc),
        )  # fmt: skip
        raise StorageError(
            f"{self.topic}-{self.partition}: write failed ({brief(exc)}), undone"
        ) from exc

    def _appended(self, assigned: AssignedBatches, log_append_time_ms: int) -> AppendResult:
        if self.log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()
        return AppendResult(
            assigned.headers[0].base_offset, assigned.headers[-1].last_offset,
            assigned.max_timestamp, assigned.offset_of_max_timestamp, log_append_time_ms,
            self.log_start_offset,
        )  # fmt: skip

    def _empty_append(self) -> AppendResult:
        return AppendResult(-1, -1, NO_TIMESTAMP, -1, NO_TIMESTAMP, self.log_start_offset)

    def needs_epoch(self, leader_epoch: int) -> bool:
        """Whether a leader append in `leader_epoch` would first assign it (a checkpoint write)."""
        latest = self.leader_epoch_cache.latest_epoch()
        return leader_epoch >= 0 and (latest is None or leader_epoch > latest)

    def _assign_epoch(self, epoch: int, start_offset: int, mark: AppendMark) -> None:
        latest = self.leader_epoch_cache.latest_epoch()
        if latest is None or epoch > latest:
            if mark.epochs is None:
                mark.epochs = self.leader_epoch_cache.entries()
            self.leader_epoch_cache.assign(epoch, start_offset)

    # -- rolls ------------------------------------------------------------------------------

    def _maybe_roll(
        self, messages_size: int, max_timestamp: int, first_offset: int, max_offset: int
    ) -> LogSegment:
        segment = self.active_segment
        if segment.should_roll(
            messages_size=messages_size, max_timestamp=max_timestamp, max_offset=max_offset,
            now_ms=self._clock.time_ms(), segment_bytes=self.config.segment_bytes,
            segment_ms=self.config.max_segment_ms,
        ):  # fmt: skip
            self._roll(max(first_offset, self.log_end_offset))
        return self.active_segment

    def roll(self) -> None:
        """Start a new active segment at the log end (no-op when the active one is empty)."""
        self._check_open()
        mark = AppendMark.take(self._segments)
        try:
            self._roll(self.log_end_offset)
        except Exception as exc:
            self._undo(mark, exc)

    def _roll(self, base_offset: int) -> None:
        active = self.active_segment
        if active.size == 0:
            if active.base_offset == base_offset:
                return
            # An empty segment below a follower's offset gap: replace it, nobody reads it.
            self._segments.drop_empty_active()
        else:
            active.on_become_inactive()
        # fsynced off the loop with the rolled segment (`rolled_files`), as Kafka does
        self.producer_state.take_snapshot(base_offset, sync=False)
        self._segments.add(self._new_segment(base_offset))

    def _new_segment(self, base_offset: int) -> LogSegment:
        return create_segment(self.directory, base_offset, self.config, self._clock, self._files)

    # -- reads ------------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None,
        min_one_batch: bool = True, below_log_start: bool = False,
    ) -> ReadResult:  # fmt: skip
        """Whole batches from the one holding `offset`, within one segment (like Kafka).
        `below_log_start`: an offset below the log start offset whose segment is still there may
        be read (ListOffsets MAX_TIMESTAMP answers from the segment, as Kafka does)."""
        self._check_open()
        first = self._segments.first.base_offset if below_log_start else self.log_start_offset
        if offset < first or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"{self.topic}-{self.partition}: offset {offset} outside "
                f"[{self.log_start_offset}, {self.log_end_offset}]"
            )
        upper = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        with self.health.offline_on_failure("read", self.log_end_offset):
            for segment in self._segments.holding_and_after(offset):
                if offset >= upper or segment.base_offset >= upper:
                    break
                # held across the cap's scan and the read: an inactive segment opens its file
                # once, not once for each (file_records: readers share an open handle)
                held = segment.records.reader()
                read = segment.read(
                    offset, max_bytes, self._max_position(segment, upper), min_one_batch
                )
                del held
                if read is not None:
                    return self._read_result(read.region, read.first_offset, read.next_offset)
        return self._read_result(None, offset, offset)

    def _max_position(self, segment: LogSegment, upper: int) -> int | None:
        if upper >= segment.next_offset:
            return None
        location = segment.translate_offset(upper)
        return None if location is None else location.position

    def _read_result(self, region: FileRegion | None, first: int, next_offset: int) -> ReadResult:
        return ReadResult(region, first, next_offset, self.log_start_offset, self.log_end_offset)

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """First batch whose max timestamp is >= `timestamp` (ListOffsets); batch granularity:
        the offset is that batch's base offset (or the log start inside it)."""
        self._check_open()
        for segment in self._segments:
            if segment.max_timestamp < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                offset, batch_timestamp, epoch = found
                return TimestampOffset(offset, batch_timestamp, epoch if epoch >= 0 else None)
        return None

    def max_timestamp_offset(self) -> TimestampOffset | None:
        """ListOffsets MAX_TIMESTAMP (-3, KIP-734): the first batch with the largest timestamp."""
        self._check_open()
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.max_timestamp >= 0 and (
                best is None or segment.max_timestamp > best.max_timestamp
            ):
                best = segment
        if best is None:
            return None
        offset = best.offset_of_max_timestamp
        return TimestampOffset(
            offset, best.max_timestamp, self.leader_epoch_cache.epoch_for_offset(offset)
        )

    # -- truncation and deletion ------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Follower truncation: remove every batch from the one holding `offset` onwards."""
        self._check_open()
        with self.health.offline_on_failure("truncation", self.log_end_offset):
            self._truncate_to(offset)

    def _truncate_to(self, offset: int) -> None:
        if offset >= self.log_end_offset:
            return
        self._truncations += 1
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        # The segment the log is cut in may be inactive, holding no descriptor (file_records):
        # open it before anything changes, so a full descriptor table refuses the truncation
        # whole (StorageError: the log is as it was) instead of after later segments went.
        held = self._segments.holding_and_after(offset)[0].records.reader()
        try:
            self._remove_segments([s for s in self._segments if s.base_offset > offset])
            self.active_segment.truncate_to(offset)
            self.log_end_offset = self.active_segment.next_offset
            if self.log_end_offset < self.log_start_offset:
                # The batch holding the log start (moved mid-batch by DeleteRecords) went too.
                self.truncate_fully_and_start_at(self.log_start_offset)
                return
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            replay_from = self.producer_state.truncate(self.log_start_offset, self.log_end_offset)
            self._replay_producer_state(replay_from)
        except StorageError as exc:  # a cold read midway (the replay's): half done, go offline
            raise self.health.fail(
                f"truncation failed midway ({brief(exc.__cause__ or exc)})",
                self.log_end_offset,
                exc,
            ) from exc
        finally:
            del held

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log, empty, at `offset`."""
        self._check_open()
        self._truncations += 1
        with self.health.offline_on_failure("truncation", self.log_end_offset):
            self._remove_segments(self._segments.snapshot())  # first: new files may reuse a name
            self._segments.add(self._new_segment(offset))
            self.log_start_offset = self.log_end_offset = self.recovery_point = offset
            self.leader_epoch_cache.clear()
            self.producer_state.truncate_fully_and_start_at(offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to `offset` and drop whole segments below it."""
        self._check_open()
        limit = self.log_end_offset if self.high_watermark is None else self.high_watermark
        if offset < 0 or offset > limit:
            raise OffsetOutOfRangeError(
                f"{self.topic}-{self.partition}: cannot delete records before {offset}, "
                f"the high watermark is {limit}"
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
        self._delete_prefix(deletable_segment_count(
            self._segments.snapshot(), config=self.config, now_ms=self._clock.time_ms(),
            log_start_offset=self.log_start_offset, log_end_offset=self.log_end_offset,
            high_watermark=self.high_watermark, by_retention=False,
        ))  # fmt: skip
        return self.log_start_offset

    def delete_old_segments(self) -> int:
        """Retention: whole segments past retention.ms / retention.bytes (cleanup.policy delete)
        or wholly below the log start. Returns how many went. When the active segment is due too
        (a quiet topic whose data all expired), a new empty one is rolled at the log end first,
        as Kafka's deleteSegments does, so the log start moves to the log end."""
        self._check_open()
        segments = self._segments.snapshot()
        count = deletable_segment_count(
            segments, config=self.config, now_ms=self._clock.time_ms(),
            log_start_offset=self.log_start_offset, log_end_offset=self.log_end_offset,
            high_watermark=self.high_watermark, by_retention=self.config.delete,
            copied_upto=self.remote_copied_upto,
        )  # fmt: skip
        if count == len(segments):
            self.roll()  # a log always keeps one segment; a failed roll is undone and raises
        self._delete_prefix(count)
        return count

    def _delete_prefix(self, count: int) -> None:
        if count <= 0:
            return
        self._remove_segments(self._segments.snapshot()[:count])
        first_base = self._segments.first.base_offset
        if first_base > self.log_start_offset:
            self.log_start_offset = first_base
            self.leader_epoch_cache.truncate_from_start(first_base)
        self.producer_state.delete_snapshots_below(first_base)

    def replace_segments(self, cleaned: LogSegment, old: Sequence[LogSegment]) -> None:
        """Compaction's swap (Kafka's replaceSegments): `cleaned`, built from the consecutive
        non-active segments `old` and starting at the same base offset with the same offsets,
        replaces them in one step for readers; `old` go the two-step `.deleted` way. Offsets,
        producer state and leader epochs are unchanged (cleaning keeps offsets and the batches
        holding producer state). Renaming `cleaned`'s files is the cleaner's business
        (cleaning_pass). Raises ValueError when `old` is not in the log as described."""
        self._check_open()
        due = self._clock.time_ms() + self.config.file_delete_delay_ms
        with self.health.offline_on_failure("compaction swap", self.log_end_offset):
            self._segments.replace(cleaned, old, due)

    def _remove_segments(self, doomed: Sequence[LogSegment]) -> None:
        """Out of the log now, renamed `.deleted`; files unlinked after file.delete.delay.ms."""
        self._segments.remove(doomed, self._clock.time_ms() + self.config.file_delete_delay_ms)

    def delete_expired_segment_files(self, now_ms: int | None = None) -> int:
        """Unlink `.deleted` segments whose delay passed; returns how many."""
        now = self._clock.time_ms() if now_ms is None else now_ms
        return self._segments.delete_expired_files(now)

    def expired_segment_files(self, now_ms: int) -> tuple[int, list[Path]]:
        """`.deleted` segments whose delay passed, closed: how many, and their files for the
        caller to unlink (`LogManager.run_delayed_deletes`, off the event loop)."""
        due = self._segments.take_expired(now_ms)
        return len(due), [path for segment in due for path in segment.close_for_unlink()]

    def remove_expired_producers(self) -> None:
        self.producer_state.remove_expired(self._clock.time_ms())

    # -- transactions -----------------------------------------------------------------------

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(first offset of an open transaction or of a completed one whose marker is at or
        above `high_watermark`, `high_watermark`); never below the log start (as Kafka)."""
        first = self.producer_state.first_unstable_offset(high_watermark)
        if first is None:
            return high_watermark
        return min(max(first, self.log_start_offset), high_watermark)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction not yet stable (open, or its marker not
        below `high_watermark` when replication set one); None when there is none."""
        first = self.producer_state.first_unstable_offset(self.high_watermark)
        return None if first is None else max(first, self.log_start_offset)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Every aborted transaction with last_offset >= fetch_offset and first_offset <
        upper_bound_offset (a read_committed fetch of [fetch_offset, upper_bound_offset))."""
        self._check_open()
        aborted: list[AbortedTxn] = []
        for segment in self._segments.holding_and_after(fetch_offset):
            found, complete = segment.txn_index.collect(fetch_offset, upper_bound_offset)
            aborted += found
            if complete:
                break
        return aborted

    def ongoing_transactions(self) -> Mapping[int, int]:
        """Producer id -> first offset of its open transaction (read-only view)."""
        return self.producer_state.ongoing_transactions()

    # -- durability and lifecycle -----------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fsync the segments holding [recovery point, up_to) and move the recovery point."""
        self._check_open()
        target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        if target <= self.recovery_point:
            if self.producer_state.unsynced:  # a roll's at the recovery point (flush.ms)
                with self.health.offline_on_failure("fsync", self.log_end_offset):
                    self.producer_state.sync_unsynced()
            return
        with self.health.offline_on_failure("fsync", self.log_end_offset):
            self._segments.flush(self.recovery_point, target)
            self.producer_state.sync_unsynced()  # a roll's, before the point passes them
        self.recovery_point = target
        self.last_flush_ms = self._clock.time_ms()

    def rolled_files(self) -> RolledFiles | None:
        """For an fsync off the event loop: the offset the recovery point may move to (the
        active segment's base), the files of the rolled segments below it that it has not
        passed and the producer snapshots the rolls wrote unsynced, and whether the directory
        needs its fsync too; None when nothing waits. `rolled_synced` applies the outcome
        (Kafka flushes a rolled segment and its snapshot asynchronously)."""
        if self._closed or self.offline:
            return None
        target = self.active_segment.base_offset
        snapshots = self.producer_state.unsynced
        if target <= self.recovery_point:
            if not snapshots:
                return None
            return RolledFiles(self.recovery_point, snapshots, True, self._truncations)
        paths, directory = self._segments.files_holding(self.recovery_point, target)
        return RolledFiles(
            target, paths + snapshots, directory or bool(snapshots), self._truncations
        )

    def rolled_synced(self, plan: RolledFiles, error: OSError | None) -> None:
        """The fsync of `plan` ended: the recovery point moves to its target (never past the
        log end) and its snapshots are synced, or the log goes offline. After a truncation
        meanwhile (a follower's) nothing moves: what the log holds below the target, or a
        snapshot at one of the paths, may have been written since; the next plan covers it."""
        if self._closed or self.offline:
            return
        if error is not None:
            raise self.health.fail(f"fsync failed ({brief(error)})", self.log_end_offset, error)
        if plan.truncations != self._truncations:
            return
        self.producer_state.synced(plan.paths)
        self.recovery_point = max(self.recovery_point, min(plan.target, self.log_end_offset))
        self.last_flush_ms = self._clock.time_ms()

    def close(self) -> None:
        """Clean close: final time index entries, fsync, producer snapshot (none for an empty
        log with no producer: the next open rebuilds that empty table from nothing), descriptors
        freed.
        A log that is (or goes) offline is only released, nothing written, and LogOfflineError
        raised: its next start must recover it."""
        if self._closed:
            return
        try:
            self._check_open()
            with self.health.offline_on_failure("clean close", self.log_end_offset):
                for segment in self._segments:
                    segment.on_become_inactive()
                self.flush()  # a roll's snapshots synced too, whether or not data was
                if self.log_end_offset > self.log_start_offset or not self.producer_state.is_empty:
                    self.producer_state.take_snapshot(self.log_end_offset)
        finally:
            self.release()

    def retire(self) -> None:
        """Refuse further use, write nothing more (staged index entries are dropped) and let go
        of the descriptors: a region in flight keeps its file open until it is dropped, whatever
        `release` (the log manager's delayed delete) does meanwhile (file_records)."""
        self._segments.retire()
        self._closed = True

    def release(self) -> None:
        """Free every descriptor without writing anything (the directory is being deleted)."""
        self._closed = True
        try:
            self._segments.release()
        except OSError as exc:  # `.deleted` leftovers are removed at the next start
            _log.warning(
                "event=release_failed topic=%s partition=%d error=%r",
                self.topic, self.partition, str(exc),
            )  # fmt: skip

    def delete(self) -> None:
        """Remove the whole partition directory now."""
        self.release()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _check_open(self) -> None:
        self.health.check()
        if self._closed:
            raise LogClosedError(f"log {self.topic}-{self.partition} is closed")

    def _replay_producer_state(self, from_offset: int) -> None:
        """Fold the batches in [from_offset, log end) into producer state (producer_replay)."""
        replay(self._segments.holding_and_after(from_offset), from_offset, self.producer_state)


def assign_epochs_together(logs: Sequence[tuple[Log, int]]) -> None:
    """Assign each `(log, leader epoch)` at its log end that `needs_epoch`, the checkpoints written
    in one batch (see the module docstring). A log whose checkpoint could not be written gets its
    entries back in memory, so its append assigns and writes alone and answers the failure."""
    due = [(log_, epoch) for log_, epoch in logs if _writable(log_) and log_.needs_epoch(epoch)]
    if not due:
        return
    before = [log_.leader_epoch_cache.entries() for log_, _ in due]
    with batched_writes() as failed:
        for log_, epoch in due:
            log_.leader_epoch_cache.assign(epoch, log_.log_end_offset)
    for (log_, _), entries in zip(due, before, strict=True):
        if log_.leader_epoch_cache.checkpoint_path in failed:
            log_.leader_epoch_cache.restore(entries)


def _writable(log_: Log) -> bool:
    return not log_.closed and not log_.offline


def _markers_of(
    data: Buffer, controls: Sequence[tuple[int, BatchHeader]]
) -> dict[int, EndTxnMarker]:
    """The marker of each replicated control batch, by offset (InvalidRecordError and
    CorruptRecordError refuse the whole append before anything is written)."""
    view = memoryview(data).cast("B")
    return {h.base_offset: read_marker(view[p : p + h.size]) for p, h in controls}
