"""Record batch v2 headers: the fixed 61-byte prefix every stored batch starts with.

Owns: parsing, CRC-checking and patching batch headers without touching the records inside, so
the hot path works on whole batches. Layout (KIP-98, seed "log format"):

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
    producerId int64 | producerEpoch int16 | baseSequence int32 | recordsCount int32 | records...

The CRC covers attributes..end, so baseOffset and partitionLeaderEpoch can be rewritten by the
broker without recomputing it. Pure functions; thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from typing_extensions import Buffer

from brokers.records.crc import crc32c
from brokers.records.errors import CorruptRecordError, UnsupportedMagicError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength, the part not counted in batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # first byte covered by the CRC
PARTITION_LEADER_EPOCH_OFFSET = 12
MAX_TIMESTAMP_OFFSET = 35
PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_MAGIC_PROBE = struct.Struct(">qib")  # baseOffset, batchLength, magic (v0/v1 share the position)
_OFFSET_AND_EPOCH = struct.Struct(">q")
_EPOCH = struct.Struct(">i")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


class BatchHeader(NamedTuple):
    """One batch's 61-byte header, decoded. A named tuple, not a frozen dataclass: a header is
    parsed several times per partition of every request, and a tuple is built in a tenth of
    the time (0.16 against 1.33 µs)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes this batch occupies in a log or a request."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


_new_header = tuple.__new__  # the named tuple's fields straight from `unpack_from`'s tuple


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at `pos`; raises CorruptRecordError when truncated."""
    view = memoryview(buf)
    if len(view) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"batch header truncated at {pos}")
    magic = view[pos + MAGIC_OFFSET]
    if magic != 2:
        raise UnsupportedMagicError(f"magic {magic} at {pos}; only v2 is supported")
    return _new_header(BatchHeader, HEADER.unpack_from(view, pos))


def iter_headers(buf: Buffer, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch; raise CorruptRecordError on a bad tail."""
    view = memoryview(buf)
    end = len(view)
    pos = start
    while pos < end:
        header = parse_header(view, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"batch length {header.batch_length} below the minimum")
        if pos + header.size > end:
            raise CorruptRecordError(f"batch at {pos} claims {header.size} bytes, {end - pos} left")
        yield pos, header
        pos += header.size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _OFFSET_AND_EPOCH.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _EPOCH.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


_TIMESTAMP = struct.Struct(">q")
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")


def batch_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC32C of the batch at `pos` of `size` bytes, over attributes..end (what the header stores)."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def verify_crc(buf: Buffer, pos: int, header: BatchHeader) -> None:
    """Raise CorruptRecordError unless the stored CRC matches the bytes (DefaultRecordBatch.isValid)."""
    actual = batch_crc(buf, pos, header.size)
    if actual != header.crc:
        raise CorruptRecordError(
            f"batch at {pos} is corrupt (stored crc {header.crc:#010x}, computed {actual:#010x})"
        )


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Mark the batch at `pos` LogAppendTime with `timestamp` as its max timestamp, fixing the CRC.

    Mirrors Kafka's `setMaxTimestamp(LOG_APPEND_TIME, now)` for topics with
    `message.timestamp.type=LogAppendTime`: readers then report `timestamp` for every record.
    Attributes and maxTimestamp are inside the CRC, so it must be recomputed (unlike baseOffset).
    """
    (attributes,) = _ATTRIBUTES.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    (batch_length,) = _EPOCH.unpack_from(buf, pos + 8)
    _ATTRIBUTES.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _TIMESTAMP.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    _CRC.pack_into(buf, pos + CRC_OFFSET, batch_crc(buf, pos, batch_length + LOG_OVERHEAD))
