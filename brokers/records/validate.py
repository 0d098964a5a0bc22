"""Leader-side validation of a produce request's records for one partition, before append.

Owns: `validate_for_append` (header-only on the default path) and `deep_validate`. Mirrors Kafka's
ProduceRequest.validateRecords, UnifiedLog.analyzeAndValidateRecords, DefaultRecordBatch.ensureValid
and LogValidator.validateBatch/validateTimestamp/validateKey, in that order and with their errors:
- empty data, more than one batch from a client (produce v3+ carries exactly one), client baseOffset
  ≠ 0, recordsCount ≤ 0 or ≠ lastOffsetDelta + 1, client-sent control batch, producer id without a
  sequence: InvalidRecordError;
- truncated data, batchLength below the 61-byte header, CRC mismatch: CorruptRecordError;
- magic ≠ 2: UnsupportedMagicError (Pier stores v2 only); batch > max.message.bytes:
  RecordTooLargeError; codec id 5–7: UnsupportedCompressionError;
- CreateTime timestamps outside message.timestamp.{before,after}.max.ms, or a client asking for
  LogAppendTime: InvalidTimestampError.
Kafka checks every record's timestamp; here the header's base (first record) and max timestamps
stand for them, so the default path does no per-record work and runs at CRC speed. Only
`requires_keys` (compacted topics) or `deep=True` decompress and decode. Pier deviation: a
transactional batch without a producer id is refused (InvalidRecordError) rather than stored.
Pure functions; thread-safe.
"""

from __future__ import annotations

from typing_extensions import Buffer

from brokers.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    parse_header,
    verify_crc,
)
from brokers.records.builder import read_batch
from brokers.records.compression import CODEC_NAMES, DEFAULT_MAX_DECOMPRESSED_SIZE
from brokers.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)

NO_TIMESTAMP = -1
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


def validate_for_append(
    data: Buffer,
    *,
    now_ms: int,
    max_message_bytes: int,
    timestamp_before_max_ms: int,
    timestamp_after_max_ms: int,
    requires_keys: bool,
    origin_client: bool = True,
    log_append_time: bool = False,
    deep: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[tuple[int, BatchHeader]]:
    """Validate `data` (one partition's records) and return (position, header) per batch.

    `log_append_time` is the topic's `message.timestamp.type == LogAppendTime`; `origin_client`
    False (coordinator writes) skips the client-only rules, as Kafka's AppendOrigin does.
    """
    view = memoryview(data)
    batches = _split(view, origin_client)
    for pos, header in batches:
        _check_envelope(view, pos, header, max_message_bytes, origin_client)
        if origin_client:
            _check_client_rules(header)
        _check_timestamps(
            header, now_ms, timestamp_before_max_ms, timestamp_after_max_ms, log_append_time
        )
        if requires_keys or deep:
            batch = view[pos : pos + header.size]
            deep_validate(
                batch,
                requires_keys=requires_keys,
                full=deep,
                max_decompressed_size=max_decompressed_size,
            )
    return batches


def _split(view: memoryview, origin_client: bool) -> list[tuple[int, BatchHeader]]:
    end = len(view)
    if end == 0:
        raise InvalidRecordError("produce data holds no record batch")
    batches: list[tuple[int, BatchHeader]] = []
    pos = 0
    while pos < end:
        if end - pos > MAGIC_OFFSET and view[pos + MAGIC_OFFSET] != 2:
            raise UnsupportedMagicError(f"magic {view[pos + MAGIC_OFFSET]}; only v2 is accepted")
        header = parse_header(view, pos)  # CorruptRecordError when shorter than a header
        if header.batch_length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {header.batch_length} below the minimum")
        if pos + header.size > end:
            raise CorruptRecordError(f"batch at {pos} claims {header.size} bytes, {end - pos} left")
        batches.append((pos, header))
        pos += header.size
    if origin_client and len(batches) > 1:
        raise InvalidRecordError("produce requests carry exactly one record batch per partition")
    return batches


def _check_envelope(
    view: memoryview, pos: int, header: BatchHeader, max_message_bytes: int, origin_client: bool
) -> None:
    if origin_client and header.base_offset != 0:
        raise InvalidRecordError(f"batch base offset must be 0, got {header.base_offset}")
    if header.size > max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {header.size} bytes exceeds max.message.bytes {max_message_bytes}"
        )
    verify_crc(view, pos, header)
    if header.compression not in CODEC_NAMES:
        raise UnsupportedCompressionError(f"unknown compression codec {header.compression}")


def _check_client_rules(header: BatchHeader) -> None:
    count = header.records_count
    if header.last_offset_delta < 0:
        raise InvalidRecordError(
            f"invalid offset range: last offset delta {header.last_offset_delta}"
        )
    if count <= 0:
        raise InvalidRecordError(f"invalid record count {count}")
    if count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"record count {count} does not match last offset delta {header.last_offset_delta}"
        )
    if header.is_control:
        raise InvalidRecordError("clients may not write control batches")
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence {header.base_sequence} for producer id {header.producer_id}"
        )
    if header.is_transactional and not header.has_producer_id:
        raise InvalidRecordError("transactional batch without a producer id")


def _check_timestamps(
    header: BatchHeader, now_ms: int, before_max_ms: int, after_max_ms: int, log_append_time: bool
) -> None:
    if log_append_time or header.is_log_append_time:
        # Kafka: a LogAppendTime batch reads every record's timestamp as maxTimestamp, so on a
        # CreateTime topic that value is range-checked; without one, or on a LogAppendTime
        # topic, the producer "should not set timestamp type to LogAppendTime".
        if header.is_log_append_time and (log_append_time or header.max_timestamp == NO_TIMESTAMP):
            raise InvalidTimestampError("producers may not set the LogAppendTime timestamp type")
        if log_append_time:
            return
        _check_in_range(header.max_timestamp, now_ms, before_max_ms, after_max_ms)
        return
    for timestamp in (header.base_timestamp, header.max_timestamp):
        if timestamp != NO_TIMESTAMP:
            _check_in_range(timestamp, now_ms, before_max_ms, after_max_ms)


def _check_in_range(timestamp: int, now_ms: int, before_max_ms: int, after_max_ms: int) -> None:
    if now_ms - timestamp > before_max_ms or timestamp - now_ms > after_max_ms:
        raise InvalidTimestampError(
            f"timestamp {timestamp} outside [{now_ms - before_max_ms}, {now_ms + after_max_ms}]"
        )


def deep_validate(
    batch: Buffer,
    *,
    requires_keys: bool = False,
    full: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> None:
    """Decompress and decode one batch; check the actual record count and, when `full`, that
    offset deltas run 0..count-1 ending at lastOffsetDelta; with `requires_keys`, that every
    record has a key ("Compacted topic cannot accept message without key")."""
    header, records = read_batch(batch, max_decompressed_size=max_decompressed_size)
    if requires_keys and any(record.key is None for record in records):
        raise InvalidRecordError("compacted topic cannot accept a record without a key")
    if not full:
        return
    for expected, record in enumerate(records):
        if record.offset_delta != expected:
            raise InvalidRecordError(
                f"record {expected} has offset delta {record.offset_delta}, expected {expected}"
            )
    if records and records[-1].offset_delta != header.last_offset_delta:
        raise InvalidRecordError(
            f"last offset delta {header.last_offset_delta} but records end at {len(records) - 1}"
        )
