"""Building and reading whole v2 batches, for the broker's own writes and for looking inside one.

Owns: `build_batch`, `build_rows_batch` (the gateway's HTTP producer: plain rows, no `Record`
object per record), `build_entries_batch` (the coordinators' keyed entries at one timestamp), `read_batch`, `reseal` (a header's batch around a new body), `recompress`,
and the test conveniences `simple_records` / `simple_batch`. Producers' batches are stored as they
arrive; these are for coordinators (offsets, transaction markers), compaction, `compression.type`
conversion, the HTTP producer and tests. Both builders write records with one encoder
(`_record`): the small varints of a record (attributes, deltas, lengths: 0 .. 16383 and -1) come
from a table instead of being written a byte at a time (the bytes of `record.encode_records`, which
a unit test holds them to), others through `write_varint`.
A record given as a tuple is `(key, value)` or `(key, value, headers)`, at offset delta = its
index and timestamp delta 0. `base_timestamp=None` means NO_TIMESTAMP (-1); `max_timestamp=None`
means base + the largest timestamp delta (NO_TIMESTAMP when there are no records or no base).
Pure functions; thread-safe.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Sequence
from typing import Any

from typing_extensions import Buffer

from brokers.records.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    parse_header,
    verify_crc,
)
from brokers.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, compress, decompress
from brokers.records.crc import crc32c
from brokers.records.errors import CorruptRecordError
from brokers.records.record import Headers, Record, decode_records
from brokers.records.varint import write_varint

NO_TIMESTAMP = -1
RecordLike = Record | tuple[Any, ...]
Row = tuple[bytes | None, bytes | None, Headers, int]  # key, value, headers, timestamp (ms)
_SMALL = 1 << 14  # varints of 0 .. _SMALL - 1 (and -1) come from the table


def _zigzag(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


_VARINTS = tuple(_zigzag(n) for n in range(_SMALL))
_NULL = _zigzag(-1)
_NO_HEADERS = _VARINTS[0]
_BYTES = tuple(bytes((b,)) for b in range(256))
_KEY, _VALUE, _HEADERS, _TIMESTAMP = map(operator.itemgetter, range(4))  # of a Row


def _varint(value: int) -> bytes:
    return _VARINTS[value] if 0 <= value < _SMALL else _zigzag(value)


def _sized(data: bytes | None) -> bytes:
    if data is None:
        return _NULL
    return _varint(len(data)) + data


def _headers(headers: Headers) -> bytes:
    if not headers:
        return _NO_HEADERS
    parts = [_varint(len(headers))]
    for key, value in headers:
        parts.append(_sized(key.encode("utf-8", "surrogateescape")))
        parts.append(_sized(value))
    return b"".join(parts)


def _encode(
    attributes: Iterable[int],
    timestamp_deltas: Iterable[int],
    offset_deltas: Iterable[int],
    keys: Iterable[bytes | None],
    values: Iterable[bytes | None],
    headers: Iterable[Headers],
) -> bytes:
    """Records back to back, each its length first, given as columns: the one encoder of every
    batch built here (a loop with no call per record but for large varints and headers)."""
    parts: list[bytes] = []
    append = parts.append
    varints, small = _VARINTS, _SMALL
    for attrs, stamp, offset, key, value, more in zip(
        attributes, timestamp_deltas, offset_deltas, keys, values, headers, strict=True
    ):
        body = b"".join(
            (
                _BYTES[attrs & 0xFF],  # an int8, not a varint
                varints[stamp] if 0 <= stamp < small else _zigzag(stamp),
                varints[offset] if 0 <= offset < small else _zigzag(offset),
                _NULL if key is None else _varint(len(key)) + key,
                _NULL if value is None else _varint(len(value)) + value,
                _NO_HEADERS if not more else _headers(more),
            )
        )
        append(_varint(len(body)))
        append(body)
    return b"".join(parts)


def _records(records: Sequence[Record]) -> bytes:
    return _encode(
        (r.attributes for r in records),
        (r.timestamp_delta for r in records),
        (r.offset_delta for r in records),
        (r.key for r in records),
        (r.value for r in records),
        (r.headers for r in records),
    )


def build_rows_batch(
    rows: Sequence[Row], *, producer_id: int, producer_epoch: int, base_sequence: int
) -> bytes:
    """One v2 batch (no compression, CreateTime) of `rows` at offset deltas 0, 1, …, the first
    row's timestamp as the base; its CRC32C set. `build_batch`'s bytes for the same records."""
    base = rows[0][3]
    stamps = list(map(_TIMESTAMP, rows))
    payload = _encode(
        itertools.repeat(0, len(rows)),
        map(operator.sub, stamps, itertools.repeat(base)),
        range(len(rows)),
        map(_KEY, rows),
        map(_VALUE, rows),
        map(_HEADERS, rows),
    )
    top = max(stamps)
    out = bytearray(HEADER_SIZE)
    out += payload
    HEADER.pack_into(
        out, 0, 0, len(out) - LOG_OVERHEAD, -1, 2, 0, 0, len(rows) - 1, base, top,
        producer_id, producer_epoch, base_sequence, len(rows),
    )  # fmt: skip
    out[CRC_OFFSET:ATTRIBUTES_OFFSET] = crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]).to_bytes(4)
    return bytes(out)


def build_entries_batch(entries: Sequence[tuple[bytes, bytes | None]], timestamp: int) -> bytes:
    """One v2 batch (no compression, CreateTime, no producer id) of keyed entries, all stamped
    `timestamp`, at offset deltas 0, 1, …: the coordinators' plain writes (an OffsetCommit's
    records, one per partition, on every commit). `build_batch`'s bytes for the same records,
    without a `Record` or a column iterator per record."""
    parts: list[bytes] = []
    append = parts.append
    for delta, (key, value) in enumerate(entries):
        body = b"".join(
            (
                b"\x00\x00",  # attributes (an int8), timestamp delta 0
                _varint(delta),
                _varint(len(key)),
                key,
                _NULL if value is None else _varint(len(value)) + value,
                _NO_HEADERS,
            )
        )
        append(_varint(len(body)))
        append(body)
    out = bytearray(HEADER_SIZE)
    out += b"".join(parts)
    HEADER.pack_into(
        out, 0, 0, len(out) - LOG_OVERHEAD, -1, 2, 0, 0, len(entries) - 1, timestamp, timestamp,
        -1, -1, -1, len(entries),
    )  # fmt: skip
    out[CRC_OFFSET:ATTRIBUTES_OFFSET] = crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]).to_bytes(4)
    return bytes(out)


def build_batch(
    records: Sequence[RecordLike],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type_log_append: bool = False,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Return one v2 batch with a correct CRC32C.

    `last_offset_delta` defaults to the last record's offset delta; pass it for an empty batch
    that must keep its offset range (Kafka keeps such batches after compaction for producer state).
    """
    recs = [r if isinstance(r, Record) else _from_tuple(i, r) for i, r in enumerate(records)]
    base = NO_TIMESTAMP if base_timestamp is None else base_timestamp
    if max_timestamp is None:
        max_timestamp = _max_timestamp(base, recs)
    if last_offset_delta is None:
        last_offset_delta = recs[-1].offset_delta if recs else 0
    payload = compress(compression, _records(recs), compression_level)
    attributes = (compression & COMPRESSION_MASK) | (
        (TIMESTAMP_TYPE_MASK if timestamp_type_log_append else 0)
        | (TRANSACTIONAL_MASK if is_transactional else 0)
        | (CONTROL_MASK if is_control else 0)
    )
    out = bytearray(HEADER_SIZE)
    out += payload
    HEADER.pack_into(
        out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, 2, 0,
        attributes, last_offset_delta, base, max_timestamp, producer_id, producer_epoch,
        base_sequence, len(recs),
    )  # fmt: skip
    out[CRC_OFFSET:ATTRIBUTES_OFFSET] = crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]).to_bytes(4)
    return bytes(out)


def _from_tuple(index: int, item: tuple[Any, ...]) -> Record:
    if len(item) == 2:
        return Record(index, 0, item[0], item[1])
    if len(item) == 3:
        return Record(index, 0, item[0], item[1], tuple(item[2]))
    raise ValueError(f"a record tuple is (key, value[, headers]), got {len(item)} items")


def _max_timestamp(base: int, records: list[Record]) -> int:
    if base == NO_TIMESTAMP or not records:
        return NO_TIMESTAMP
    return base + max(r.timestamp_delta for r in records)


def read_batch(
    buf: Buffer, pos: int = 0, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> tuple[BatchHeader, list[Record]]:
    """Parse, CRC-check, decompress and decode the batch at `pos`."""
    view = memoryview(buf)
    header = parse_header(view, pos)
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > len(view):
        raise CorruptRecordError(f"batch at {pos} claims {header.size} bytes")
    verify_crc(view, pos, header)
    body = view[pos + HEADER_SIZE : pos + header.size]
    payload = decompress(header.compression, body, max_decompressed_size)
    return header, decode_records(payload, header.records_count)


def reseal(header: BatchHeader, body: Buffer, *, compression: int, max_timestamp: int) -> bytes:
    """The batch `header` describes, around `body` (records under `compression`), new CRC.

    Every other header field is kept: offsets, producer fields, flags, base timestamp, count."""
    attributes = (header.attributes & ~COMPRESSION_MASK) | (compression & COMPRESSION_MASK)
    out = bytearray(HEADER_SIZE)
    out += body
    HEADER.pack_into(
        out, 0, header.base_offset, len(out) - LOG_OVERHEAD, header.partition_leader_epoch, 2, 0,
        attributes, header.last_offset_delta, header.base_timestamp, max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, header.records_count,
    )  # fmt: skip
    out[CRC_OFFSET:ATTRIBUTES_OFFSET] = crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]).to_bytes(4)
    return bytes(out)


def recompress(
    batch: Buffer,
    codec: int,
    *,
    level: int | None = None,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Rebuild `batch` under `codec`, keeping offsets, timestamps, producer fields and flags.

    The records' bytes are the same under every codec, so nothing is decoded."""
    view = memoryview(batch)
    header = parse_header(view)
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or header.size > len(view):
        raise CorruptRecordError(f"batch claims {header.size} bytes")
    verify_crc(view, 0, header)
    body = view[HEADER_SIZE : header.size]
    payload = decompress(header.compression, body, max_decompressed_size)
    packed = compress(codec, payload, level)
    return reseal(header, packed, compression=codec, max_timestamp=header.max_timestamp)


def simple_records(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Headers] | None = None,
    timestamps: Sequence[int] | None = None,
) -> list[Record]:
    """Records at consecutive offsets; `timestamps` (absolute ms) become deltas from the first.

    Pass `base_timestamp=timestamps[0]` to `build_batch`, or use `simple_batch`.
    """
    base = timestamps[0] if timestamps else 0
    return [
        Record(
            offset_delta=i,
            timestamp_delta=(timestamps[i] - base) if timestamps else 0,
            key=keys[i] if keys is not None else None,
            value=value,
            headers=headers[i] if headers is not None else (),
        )
        for i, value in enumerate(values)
    ]


def simple_batch(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Headers] | None = None,
    timestamps: Sequence[int] | None = None,
    **build_options: Any,
) -> bytes:
    """`build_batch(simple_records(...))` with the base timestamp taken from `timestamps`."""
    if timestamps:
        build_options.setdefault("base_timestamp", timestamps[0])
    return build_batch(simple_records(values, keys, headers, timestamps), **build_options)
