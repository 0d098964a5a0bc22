"""Idempotent-producer state of one partition: epochs, recent sequences, snapshots (KIP-98).

Owns: per producer id the epoch and the metadata of its last five batches (Kafka's
`ProducerStateEntry`), the duplicate / sequence / epoch checks a leader runs before appending
(Kafka's `ProducerAppendInfo`), expiry after `producer.id.expiration.ms`, and the `.snapshot` files
(`<next offset:020d>.snapshot` in the partition directory) that let recovery replay only the tail.

Kafka 3.x/4.x behaviour mirrored:
- a duplicate is a batch of the current epoch whose (first, last) sequence equals one of the five
  cached batches; the append answers with the original offsets;
- same epoch: the first sequence must follow the last one (int32 wraps to 0), else
  OutOfOrderSequenceError; a newer epoch must start at sequence 0 (OutOfOrderSequenceError);
  an older epoch is fenced (InvalidProducerEpochError);
- an unknown producer id (or one with no epoch: its data was removed by retention or
  DeleteRecords) is accepted at any sequence: since KIP-360 brokers no longer answer
  UNKNOWN_PRODUCER_ID on produce;
- a non-transactional batch while the producer's transaction is open → InvalidTxnStateError.
  `current_txn_first_offset` is kept (and snapshotted) for the transaction coordinator.

Snapshots keep Kafka's framing (int16 version, uint32 CRC32C of the rest, int32 entry count).
Kafka's version 1 keeps only the last batch per producer; we write version 2, which keeps all five
so duplicates are still recognised after a restart, and read both. Files are written to a
temporary name, fsynced and renamed. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from brokers.clock import Clock
from brokers.log.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from brokers.records.batch import NO_SEQUENCE, BatchHeader
from brokers.records.crc import crc32c

log = logging.getLogger(__name__)

BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN (max.in.flight = 5)
NO_PRODUCER_EPOCH = -1
INT32_MAX = 2**31 - 1
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_NAME = re.compile(r"(\d{20})\.snapshot")
_PREFIX = struct.Struct(">hIi")  # version, crc, entry count
_CRC_FROM = 6  # the CRC covers everything after version + crc
_V1_ENTRY = struct.Struct(">qhiqiqiq")  # pid, epoch, last seq, last offset, delta, ts, coord, txn
_V2_ENTRY = struct.Struct(">qhiqqb")  # pid, epoch, coordinator epoch, last ts, txn first, n
_V2_BATCH = struct.Struct(">iqiq")  # last seq, last offset, offset delta, timestamp
_WRITE_VERSION = 2


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is remembered of one appended batch (Kafka's BatchMetadata)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class DuplicateBatch:
    """The offsets a retried batch was originally written at."""

    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    """One producer id's state. Read-only for callers; only ProducerStateManager mutates it."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_sequence(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_seq == first and batch.last_seq == last:
                return batch
        return None

    def copy(self) -> ProducerStateEntry:
        batches = deque(self.batches, maxlen=BATCHES_TO_RETAIN)
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, batches, self.coordinator_epoch,
            self.last_timestamp, self.current_txn_first_offset,
        )  # fmt: skip


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Sequence arithmetic that wraps at int32 max like Kafka's DefaultRecordBatch."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """The producer table of one partition plus its snapshot files in `directory`."""

    def __init__(
        self, directory: Path, *, clock: Clock, producer_id_expiration_ms: int = 86400000
    ) -> None:
        self.directory = directory
        self._clock = clock
        self._expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        # The offset after the last producer batch (or snapshot) folded in: truncating the log
        # below it must forget state; batches without a producer id never move it.
        self.map_end_offset = 0
        for leftover in directory.glob(f"*{SNAPSHOT_SUFFIX}.tmp"):
            leftover.unlink(missing_ok=True)  # a crash mid-write; the rename never happened

    # -- the append path ------------------------------------------------------------------

    def check(self, header: BatchHeader) -> DuplicateBatch | None:
        """Validate a client batch before it is written; a duplicate returns its original offsets."""
        if header.producer_id < 0:
            return None
        return _check(self._producers.get(header.producer_id), header)

    def check_all(self, headers: Sequence[BatchHeader]) -> list[DuplicateBatch | None]:
        """`check` for several batches of one request: later batches see the earlier ones."""
        pending: dict[int, ProducerStateEntry] = {}
        results: list[DuplicateBatch | None] = []
        for header in headers:
            pid = header.producer_id
            entry = pending.get(pid) or self._producers.get(pid)
            duplicate = None if pid < 0 else _check(entry, header)
            if pid >= 0 and duplicate is None:
                pending[pid] = entry.copy() if entry else ProducerStateEntry(pid)
                _apply(pending[pid], header, None)
            results.append(duplicate)
        return results

    def update(self, header: BatchHeader, *, coordinator_epoch: int | None = None) -> None:
        """Record a written batch; `header.base_offset` is the offset it was assigned."""
        if header.producer_id < 0:
            return
        self.map_end_offset = max(self.map_end_offset, header.next_offset)
        entry = self._producers.get(header.producer_id)
        if entry is None:
            entry = self._producers[header.producer_id] = ProducerStateEntry(header.producer_id)
        _apply(entry, header, coordinator_epoch)

    # -- queries ----------------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def producer_ids(self) -> list[int]:
        return sorted(self._producers)

    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view for DescribeProducers."""
        return MappingProxyType(self._producers)

    def remove_expired(self, now_ms: int) -> None:
        """Forget producers idle for producer.id.expiration.ms; never one with an open transaction."""
        expired = [pid for pid, e in self._producers.items() if self._is_expired(e, now_ms)]
        for pid in expired:
            del self._producers[pid]

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        if entry.current_txn_first_offset is not None:
            return False
        return now_ms - entry.last_timestamp >= self._expiration_ms

    # -- snapshots, recovery and truncation -------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        names = (_SNAPSHOT_NAME.fullmatch(p.name) for p in self.directory.iterdir())
        return sorted(int(m.group(1)) for m in names if m)

    def latest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[-1] if offsets else None

    def snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def take_snapshot(self, next_offset: int) -> None:
        """Write the whole table as `<next_offset:020d>.snapshot` (atomically, fsynced)."""
        _write_atomically(
            self.snapshot_path(next_offset), encode_snapshot(self._producers.values())
        )

    def load(self, log_start_offset: int, up_to_offset: int) -> int:
        """Reset to the newest readable snapshot in [log_start, up_to]; corrupt ones are deleted.

        Returns the offset the caller replays batch headers from (through `update`): the
        snapshot's offset, or `log_start_offset` when none is usable.
        """
        self._producers.clear()
        candidates = [o for o in self.snapshot_offsets() if log_start_offset <= o <= up_to_offset]
        now_ms = self._clock.time_ms()
        for offset in reversed(candidates):
            path = self.snapshot_path(offset)
            try:
                entries = decode_snapshot(path.read_bytes())
            except (CorruptSnapshotError, OSError) as exc:
                log.warning("ignoring producer snapshot %s: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            for entry in entries:
                if not self._is_expired(entry, now_ms):
                    self._producers[entry.producer_id] = entry
            self.map_end_offset = offset
            return offset
        self.map_end_offset = log_start_offset
        return log_start_offset

    def truncate(self, log_start_offset: int, log_end_offset: int) -> int:
        """Drop snapshots outside [log_start, log_end] and forget state from offsets >= log_end.

        Returns the offset the caller must replay batch headers from up to `log_end_offset`;
        it equals `log_end_offset` when nothing was forgotten (no replay needed).
        """
        for offset in self.snapshot_offsets():
            if offset > log_end_offset or offset < log_start_offset:
                self.snapshot_path(offset).unlink(missing_ok=True)
        if log_end_offset < self.map_end_offset:
            return self.load(log_start_offset, log_end_offset)
        return log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything (the log was emptied and restarts at `offset`)."""
        self._producers.clear()
        self.delete_snapshots_below(2**63 - 1)
        self.map_end_offset = offset

    def delete_snapshots_below(self, offset: int) -> None:
        for snapshot in self.snapshot_offsets():
            if snapshot < offset:
                self.snapshot_path(snapshot).unlink(missing_ok=True)


def _check(entry: ProducerStateEntry | None, header: BatchHeader) -> DuplicateBatch | None:
    if entry is None:
        return None  # unknown producer: any sequence is accepted (KIP-360)
    has_sequence = not header.is_control and header.base_sequence != NO_SEQUENCE
    duplicate = entry.find_duplicate(header) if has_sequence else None
    if duplicate is not None:
        return DuplicateBatch(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp)
    if header.producer_epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(
            f"producer {header.producer_id}: epoch {header.producer_epoch} is older than "
            f"the current epoch {entry.producer_epoch}"
        )
    if has_sequence:  # coordinator-written batches carry no sequence: epoch check only
        _check_sequence(entry, header)
    if entry.current_txn_first_offset is not None and not header.is_transactional:
        raise InvalidTxnStateError(
            f"producer {header.producer_id} has an open transaction; expected a transactional batch"
        )
    return None


def _check_sequence(entry: ProducerStateEntry, header: BatchHeader) -> None:
    first = header.base_sequence
    if header.producer_epoch != entry.producer_epoch:
        if first != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id}: new epoch {header.producer_epoch} must start at "
                f"sequence 0, got {first}"
            )
        return
    last = entry.last_sequence
    if entry.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(last, first):
        raise OutOfOrderSequenceError(
            f"producer {header.producer_id}: sequence {first} does not follow {last}"
        )


def _apply(entry: ProducerStateEntry, header: BatchHeader, coordinator_epoch: int | None) -> None:
    """Fold a written batch into the entry (Kafka's ProducerAppendInfo + ProducerStateEntry)."""
    if header.producer_epoch != entry.producer_epoch:
        entry.batches.clear()  # a new epoch restarts the sequence space
        entry.producer_epoch = header.producer_epoch
    entry.last_timestamp = header.max_timestamp
    if header.is_control:
        # An end-transaction marker closes the open transaction (its records are not parsed here).
        entry.current_txn_first_offset = None
        if coordinator_epoch is not None:
            entry.coordinator_epoch = coordinator_epoch
        return
    entry.batches.append(
        BatchMetadata(
            header.last_sequence, header.last_offset, header.last_offset_delta, header.max_timestamp
        )
    )
    if header.is_transactional and entry.current_txn_first_offset is None:
        entry.current_txn_first_offset = header.base_offset


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """Version 2 snapshot bytes: Kafka's framing, every retained batch per producer."""
    body = bytearray()
    count = 0
    for e in entries:
        txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
        body += _V2_ENTRY.pack(
            e.producer_id, e.producer_epoch, e.coordinator_epoch, e.last_timestamp, txn,
            len(e.batches),
        )  # fmt: skip
        for b in e.batches:
            body += _V2_BATCH.pack(b.last_seq, b.last_offset, b.offset_delta, b.timestamp)
        count += 1
    count_bytes = struct.pack(">i", count)
    crc = crc32c(count_bytes + body)
    return struct.pack(">hI", _WRITE_VERSION, crc) + count_bytes + body


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse a version 1 (Kafka) or 2 (Pier) snapshot; raises CorruptSnapshotError."""
    if len(data) < _PREFIX.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is truncated")
    version, crc, count = _PREFIX.unpack_from(data)
    if version not in (1, 2):
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    if crc32c(memoryview(data)[_CRC_FROM:]) != crc:
        raise CorruptSnapshotError("snapshot CRC mismatch")
    if count < 0:
        raise CorruptSnapshotError(f"negative entry count {count}")
    try:
        if version == 1:
            return _decode_v1(data, count)
        return _decode_v2(data, count)
    except struct.error as exc:
        raise CorruptSnapshotError(f"snapshot truncated: {exc}") from None


def _decode_v1(data: bytes, count: int) -> list[ProducerStateEntry]:
    if len(data) != _PREFIX.size + count * _V1_ENTRY.size:
        raise CorruptSnapshotError("snapshot size does not match its entry count")
    entries = []
    for pid, epoch, last_seq, last_offset, delta, ts, coordinator, txn in _V1_ENTRY.iter_unpack(
        memoryview(data)[_PREFIX.size :]
    ):
        entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coordinator, last_timestamp=ts)
        entry.current_txn_first_offset = txn if txn >= 0 else None
        if last_offset >= 0:
            entry.batches.append(BatchMetadata(last_seq, last_offset, delta, ts))
        entries.append(entry)
    return entries


def _decode_v2(data: bytes, count: int) -> list[ProducerStateEntry]:
    pos, entries = _PREFIX.size, []
    for _ in range(count):
        pid, epoch, coordinator, ts, txn, n = _V2_ENTRY.unpack_from(data, pos)
        pos += _V2_ENTRY.size
        if not 0 <= n <= BATCHES_TO_RETAIN:
            raise CorruptSnapshotError(f"producer {pid} claims {n} batches")
        entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coordinator, last_timestamp=ts)
        entry.current_txn_first_offset = txn if txn >= 0 else None
        for _ in range(n):
            entry.batches.append(BatchMetadata(*_V2_BATCH.unpack_from(data, pos)))
            pos += _V2_BATCH.size
        entries.append(entry)
    if pos != len(data):
        raise CorruptSnapshotError(f"{len(data) - pos} trailing bytes after the entries")
    return entries


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
