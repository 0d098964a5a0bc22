"""Producer-state snapshot files: `<next offset:020d>.snapshot` in the partition directory.

Snapshots keep Kafka's framing (int16 version, uint32 CRC32C of the rest, int32 entry count).
Kafka's version 1 keeps only the last batch per producer; we write version 2, which keeps all five
so duplicates are still recognised after a restart, and read both. Files are written to a
temporary name, fsynced and renamed by the manager (`file_ops.write_atomically`). Pure codec;
thread-safe.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable

from brokers.log.errors import CorruptSnapshotError
from brokers.log.producer_state.entry import BATCHES_TO_RETAIN, BatchMetadata, ProducerStateEntry
from brokers.records.crc import crc32c

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_NAME = re.compile(r"(\d{20})\.snapshot")
_PREFIX = struct.Struct(">hIi")  # version, crc, entry count
_CRC_FROM = 6  # the CRC covers everything after version + crc
_V1_ENTRY = struct.Struct(">qhiqiqiq")  # pid, epoch, last seq, last offset, delta, ts, coord, txn
_V2_ENTRY = struct.Struct(">qhiqqb")  # pid, epoch, coordinator epoch, last ts, txn first, n
_V2_BATCH = struct.Struct(">iqiq")  # last seq, last offset, offset delta, timestamp
_WRITE_VERSION = 2


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
