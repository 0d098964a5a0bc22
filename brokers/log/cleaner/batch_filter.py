"""What compaction keeps of one stored batch (Kafka's shouldRetainRecord + MemoryRecords.filterTo).

Owns: reading the keys of a batch's records without building `Record`s, the retention rule, and the
batch written in its place. Rules mirrored from Kafka (LogCleaner's cleanInto):
- a batch wholly past the offset map's latest offset (not cleaned in this round) is kept whole,
  whatever its transaction (Kafka would already drop aborted data and markers there; we keep every
  batch from the round's first uncleanable offset on byte for byte, and the next round does it);
- transactions: the caller says whether the batch is discardable (`CleanedTransactions`: a data
  batch of an aborted transaction; a marker whose transaction has no data left). A discardable data
  batch loses every record. A discardable marker first gets a delete horizon (below) and loses its
  record only once now >= that horizon, so markers outlive their data by delete.retention.ms, like
  tombstones; other control batches are kept whole;
- a record is kept when its offset is past the map's latest offset, or it has a key, its offset is
  at or after the map's offset for that key, and it has a value or its tombstone is still inside
  the delete horizon; records without a key are dropped (Kafka counts them as invalid);
- tombstones (KIP-534): a batch keeping a tombstone but carrying no delete horizon is rewritten
  with attribute bit 6 set and baseTimestamp = now + delete.retention.ms, record timestamp deltas
  rebased so every absolute timestamp is unchanged; once now >= that horizon its tombstones go;
- a batch keeping every record (and needing no horizon) is copied byte for byte; otherwise a new
  batch is built around the kept records with the original base offset, last offset delta (so
  the producer's last sequence survives), producer id/epoch/base sequence, leader epoch, flags
  and codec, and the max timestamp of the kept records. Unless a horizon is being set, the kept
  records' bytes are copied as they are (their deltas still hold): no record is re-encoded;
- a batch keeping nothing is dropped, except (Kafka's RETAIN_EMPTY) the batch holding an active
  producer's last data offset (its last sequence), or, for a producer whose last entry is a
  marker, its control batches of its current epoch (fencing), and the batch ending at the round's
  upper bound, which keeps the last offset: those become empty batches (Kafka's writeEmptyHeader:
  header only, count 0, no codec, no horizon, base timestamp -1).

Pure functions over bytes and a read-only OffsetMap; thread-safe while the map is not written.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from typing_extensions import Buffer

from brokers.log.cleaner.offset_map import OffsetMap
from brokers.records.batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    batch_crc,
    parse_header,
    verify_crc,
)
from brokers.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, compress, decompress
from brokers.records.errors import InvalidRecordError
from brokers.records.record import Record, decode_records, encode_records
from brokers.records.varint import read_varint, read_varlong

NO_TIMESTAMP = -1
_UINT32 = struct.Struct(">I")
_EMPTY_BATCH_FLAGS = TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK  # no codec
RecordKey = tuple[int, bytes | None, bool, int, int]  # (delta, key, has value, start, end)


class LastRecord(NamedTuple):
    """An active producer's last entry in the log (Kafka's LastRecord)."""

    last_data_offset: int | None  # None: no data batch since its last epoch change (a marker)
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class FilterContext:
    """What one cleaning round decides with, fixed when its offset map is complete."""

    now_ms: int
    delete_retention_ms: int
    latest_offset: int  # the offset map's: records after it are not cleaned this round
    upper_bound_offset: int  # the round's first uncleanable offset
    producer_last_records: Mapping[int, LastRecord]  # active producer id -> its last entry
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE


@dataclass(frozen=True, slots=True)
class FilteredBatch:
    data: Buffer | None  # None: the batch is dropped
    header: BatchHeader | None
    records_read: int
    records_kept: int


def batch_payload(batch: memoryview, header: BatchHeader, max_size: int) -> bytes:
    """The records of a batch, CRC-checked and decompressed (raises a RecordError)."""
    verify_crc(batch, 0, header)
    return decompress(header.compression, batch[HEADER_SIZE : header.size], max_size)


def record_keys(payload: bytes, count: int) -> list[RecordKey]:
    """(offset delta, key, has value, start, end) per record, start..end being its bytes;
    timestamps, values and headers are skipped.

    The hot loop of compaction, so one-byte varints are decoded inline, the timestamp delta is
    skipped without decoding, and "has a value" is the sign bit of the value length's zigzag
    varint (its lowest bit: any negative length reads as null, as in Kafka)."""
    keys: list[RecordKey] = []
    append, end_of_payload, pos = keys.append, len(payload), 0
    try:
        for _ in range(count):
            start, byte = pos, payload[pos]
            if byte < 0x80:
                length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            else:
                length, pos = read_varint(payload, pos)
            end = pos + length
            if length <= 0 or end > end_of_payload:
                raise InvalidRecordError(f"record length {length} at {pos} overruns the batch")
            at = pos + 1  # after the attributes byte
            while payload[at] & 0x80:  # the timestamp delta varlong
                at += 1
            byte = payload[at + 1]
            if byte < 0x80:
                delta, at = (byte >> 1) ^ -(byte & 1), at + 2
            else:
                delta, at = read_varint(payload, at + 1)
            byte = payload[at]
            if byte < 0x80:
                size, at = (byte >> 1) ^ -(byte & 1), at + 1
            else:
                size, at = read_varint(payload, at)
            key = payload[at : at + size] if size >= 0 else None
            at += max(size, 0)
            if at >= end:
                raise InvalidRecordError(f"record at {pos} is shorter than its fields")
            append((delta, key, not payload[at] & 1, start, end))
            pos = end
    except IndexError as exc:
        raise InvalidRecordError("record truncated") from exc
    if pos != end_of_payload:
        raise InvalidRecordError(f"{end_of_payload - pos} bytes left after {count} records")
    return keys


def filter_batch(
    batch: memoryview, header: BatchHeader, offset_map: OffsetMap, context: FilterContext,
    *, discardable: bool = False,
) -> FilteredBatch:  # fmt: skip
    """What is written in place of `batch`; `discardable` is `CleanedTransactions`' verdict."""
    count = header.records_count
    if header.base_offset > context.latest_offset:
        return FilteredBatch(batch, header, count, count)
    if header.is_control:
        return _filter_control(batch, header, context, discardable)
    if discardable:  # a batch of an aborted transaction
        return _emptied(header, context)
    payload = batch_payload(batch, header, context.max_decompressed_size)
    keys = record_keys(payload, count)
    horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None
    kept = _kept_indexes(keys, header.base_offset, horizon, offset_map, context)
    needs_horizon = horizon is None and any(not keys[i][2] for i in kept)
    if kept and len(kept) == len(keys) and not needs_horizon:
        return FilteredBatch(batch, header, count, count)
    if needs_horizon:
        records = decode_records(payload, count)
        new_horizon = context.now_ms + context.delete_retention_ms
        data = with_delete_horizon(header, [records[i] for i in kept], new_horizon)
    elif kept:
        data = _copy_kept(header, payload, [keys[i] for i in kept])
    else:
        return _emptied(header, context)
    return FilteredBatch(data, parse_header(data), count, len(kept))


def _filter_control(
    batch: memoryview, header: BatchHeader, context: FilterContext, discardable: bool
) -> FilteredBatch:
    """A marker stays whole until it is discardable and its delete horizon has passed; the
    first round finding it discardable sets the horizon (Kafka's containsMarkerForEmptyTxn)."""
    count = header.records_count
    horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None
    if count == 0 or (discardable and horizon is not None and context.now_ms >= horizon):
        return _emptied(header, context)
    if discardable and horizon is None:
        payload = batch_payload(batch, header, context.max_decompressed_size)
        new_horizon = context.now_ms + context.delete_retention_ms
        data = with_delete_horizon(header, decode_records(payload, count), new_horizon)
        return FilteredBatch(data, parse_header(data), count, count)
    return FilteredBatch(batch, header, count, count)


def _emptied(header: BatchHeader, context: FilterContext) -> FilteredBatch:
    """No record of the batch is kept: an empty batch in its place, or nothing."""
    if not _retain_empty(header, context):
        return FilteredBatch(None, None, header.records_count, 0)
    flags = header.attributes & _EMPTY_BATCH_FLAGS
    data = _assemble(header, b"", 0, NO_TIMESTAMP, header.max_timestamp, flags)
    return FilteredBatch(data, parse_header(data), header.records_count, 0)


def _kept_indexes(
    keys: list[RecordKey], base_offset: int, horizon: int | None, offset_map: OffsetMap,
    context: FilterContext,
) -> list[int]:  # fmt: skip
    latest, get = context.latest_offset, offset_map.get
    retain_deletes = horizon is None or context.now_ms < horizon
    kept: list[int] = []
    for index, (delta, key, has_value, _, _) in enumerate(keys):
        offset = base_offset + delta
        if offset > latest or (
            key is not None and offset >= get(key) and (has_value or retain_deletes)
        ):
            kept.append(index)
    return kept


def _retain_empty(header: BatchHeader, context: FilterContext) -> bool:
    """Kafka's RETAIN_EMPTY: the batch holds producer state, or the round's last offset."""
    last = (
        context.producer_last_records.get(header.producer_id) if header.producer_id >= 0 else None
    )
    if last is not None:
        if last.last_data_offset is not None:
            if header.last_offset == last.last_data_offset:
                return True
        elif header.is_control and header.producer_epoch == last.producer_epoch:
            return True
    return header.next_offset == context.upper_bound_offset


def _copy_kept(header: BatchHeader, payload: bytes, kept: list[RecordKey]) -> bytes:
    """The kept records' bytes as they are (same base offset and timestamp: deltas still hold)."""
    records = b"".join(payload[start:end] for _, _, _, start, end in kept)
    if header.is_log_append_time:
        max_timestamp = header.max_timestamp
    else:
        deltas = (_timestamp_delta(payload, start) for _, _, _, start, _ in kept)
        max_timestamp = header.base_timestamp + max(deltas)
    return _assemble(
        header, records, len(kept), header.base_timestamp, max_timestamp, header.attributes
    )


def with_delete_horizon(header: BatchHeader, records: list[Record], horizon: int) -> bytes:
    """`header`'s batch holding `records`, its base timestamp the delete horizon (KIP-534):
    timestamp deltas are rebased so every record keeps its absolute timestamp."""
    shift = header.base_timestamp - horizon
    rebased = [
        Record(r.offset_delta, r.timestamp_delta + shift, r.key, r.value, r.headers, r.attributes)
        for r in records
    ]
    if header.is_log_append_time:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = header.base_timestamp + max(r.timestamp_delta for r in records)
    attributes = header.attributes | DELETE_HORIZON_MASK
    return _assemble(
        header, encode_records(rebased), len(records), horizon, max_timestamp, attributes
    )


def _assemble(
    header: BatchHeader, records: bytes, count: int, base_timestamp: int, max_timestamp: int,
    attributes: int,
) -> bytes:  # fmt: skip
    """A v2 batch with `header`'s offsets, producer fields and leader epoch around `records`
    (uncompressed bytes, compressed here with the codec of `attributes`)."""
    out = bytearray(HEADER_SIZE)
    out += compress(attributes & COMPRESSION_MASK, records)
    HEADER.pack_into(
        out, 0, header.base_offset, len(out) - LOG_OVERHEAD, header.partition_leader_epoch, 2, 0,
        attributes, header.last_offset_delta, base_timestamp, max_timestamp, header.producer_id,
        header.producer_epoch, header.base_sequence, count,
    )  # fmt: skip
    _UINT32.pack_into(out, CRC_OFFSET, batch_crc(out, 0, len(out)))
    return bytes(out)


def _timestamp_delta(payload: bytes, start: int) -> int:
    _, body = read_varint(payload, start)  # the record's length
    delta, _ = read_varlong(payload, body + 1)  # after its attributes byte
    return delta
