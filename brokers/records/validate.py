"""Leader-side validation of a produce request's records for one partition: the rules and the
header-level half of them.

Owns: `AppendPolicy` (a topic's rules for one append, and Pier's caps on batch work),
`split_batches` and `check_headers` (the header-level checks), and `validate_for_append` (every
check, rebuilding nothing: tools and tests). `prepare.prepare_append`, the broker's path, runs
these and then the per-record checks of `record_walk` on every batch. Mirrors Kafka's ProduceRequest.validateRecords,
UnifiedLog.analyzeAndValidateRecords, DefaultRecordBatch.ensureValid and LogValidator
(validateBatch, validateRecord, validateKey, validateTimestamp), in that order, with their errors:
- empty data, more than one batch from a client (produce v3+ carries exactly one), client baseOffset
  ≠ 0, recordsCount ≤ 0 or ≠ lastOffsetDelta + 1, client-sent control batch, producer id without a
  sequence: InvalidRecordError;
- truncated data, batchLength below the 61-byte header, CRC mismatch: CorruptRecordError;
- magic ≠ 2: UnsupportedMagicError (Pier stores v2 only); batch > max.message.bytes:
  RecordTooLargeError; codec id 5–7: UnsupportedCompressionError;
- a client asking for LogAppendTime without a max timestamp, or on a LogAppendTime topic; on a
  CreateTime topic a LogAppendTime batch's max timestamp (every record's timestamp) outside
  message.timestamp.{before,after}.max.ms: InvalidTimestampError;
- per record (`record_walk`): structure, exact record count, offset deltas 0..n-1, keys on
  compacted topics, every CreateTime timestamp in the window.
Pier's caps (Kafka has none; broker properties, see brokers/log/config.py): a compressed batch
decompressing beyond `max_decompressed_bytes` (pier.batch.max.decompressed.bytes, 64 MiB), or
holding more than `max_records` records (pier.batch.max.records, 2^20): RecordTooLargeError,
MESSAGE_TOO_LARGE, on which Kafka's Java producer splits the batch and retries. Pier deviation: a
transactional batch without a producer id is refused (InvalidRecordError) rather than stored.
Pure functions; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from typing_extensions import Buffer

from brokers.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    parse_header,
    verify_crc,
)
from brokers.records.compression import CODEC_NAMES, NONE, decompress
from brokers.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)
from brokers.records.record_walk import NO_TIMESTAMP, TimestampWindow, check_records

MAX_BATCH_DECOMPRESSED_BYTES = 64 * 1024 * 1024
MAX_BATCH_RECORDS = 1 << 20
_LONG_MAX = 2**63 - 1
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

Batches = list[tuple[int, BatchHeader]]  # (position in the data, header) per batch


@dataclass(slots=True)  # not frozen: one per partition appended, built 6x faster
class AppendPolicy:
    """What one append must satisfy; built on the event loop, used wherever the work runs.

    `target_codec` is the topic's compression.type as a codec id (None: `producer`);
    `log_append_time` its message.timestamp.type == LogAppendTime; `origin_client` False
    (coordinator writes) skips the client-only rules, as Kafka's AppendOrigin does."""

    now_ms: int
    max_message_bytes: int
    timestamp_before_max_ms: int = _LONG_MAX
    timestamp_after_max_ms: int = 3_600_000
    requires_keys: bool = False
    log_append_time: bool = False
    origin_client: bool = True
    target_codec: int | None = None
    compression_level: int | None = None
    max_decompressed_bytes: int = MAX_BATCH_DECOMPRESSED_BYTES
    max_records: int = MAX_BATCH_RECORDS

    def window(self, header: BatchHeader) -> TimestampWindow | None:
        """The CreateTime window records are checked against; None when they are not."""
        if self.log_append_time or header.is_log_append_time:
            return None
        return TimestampWindow.around(
            self.now_ms, self.timestamp_before_max_ms, self.timestamp_after_max_ms
        )


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
    max_decompressed_size: int = MAX_BATCH_DECOMPRESSED_BYTES,
) -> Batches:
    """Every check of a leader append on `data`, nothing rebuilt; (position, header) per batch."""
    policy = AppendPolicy(
        now_ms=now_ms,
        max_message_bytes=max_message_bytes,
        timestamp_before_max_ms=timestamp_before_max_ms,
        timestamp_after_max_ms=timestamp_after_max_ms,
        requires_keys=requires_keys,
        log_append_time=log_append_time,
        origin_client=origin_client,
        max_decompressed_bytes=max_decompressed_size,
    )
    view = memoryview(data)
    batches = split_batches(view, origin_client)
    check_headers(view, batches, policy)
    for pos, header in batches:
        body = view[pos + HEADER_SIZE : pos + header.size]
        payload = body
        if header.compression != NONE:
            payload = memoryview(decompress(header.compression, body, max_decompressed_size))
        window = policy.window(header)
        check_records(
            payload, header.records_count, header.base_timestamp, window=window,
            requires_keys=requires_keys,
        )  # fmt: skip
    return batches


def split_batches(view: memoryview, origin_client: bool) -> Batches:
    """Headers of the batches in `view` (no CRC yet): cheap, so callers can size the work."""
    end = len(view)
    if end == 0:
        raise InvalidRecordError("produce data holds no record batch")
    batches: Batches = []
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


def check_headers(view: memoryview, batches: Batches, policy: AppendPolicy) -> None:
    """Every header-level rule, CRC included, for the batches `split_batches` found."""
    for pos, header in batches:
        _check_envelope(view, pos, header, policy)
        if policy.origin_client:
            _check_client_rules(header)
        _check_log_append_time(header, policy)


def _check_envelope(view: memoryview, pos: int, header: BatchHeader, policy: AppendPolicy) -> None:
    if policy.origin_client and header.base_offset != 0:
        raise InvalidRecordError(f"batch base offset must be 0, got {header.base_offset}")
    if header.size > policy.max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {header.size} bytes exceeds max.message.bytes {policy.max_message_bytes}"
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


def _check_log_append_time(header: BatchHeader, policy: AppendPolicy) -> None:
    """Kafka reads every record of a LogAppendTime batch as its maxTimestamp, so on a CreateTime
    topic that one value is range-checked; without one, or on a LogAppendTime topic, the
    producer "should not set timestamp type to LogAppendTime"."""
    if not header.is_log_append_time:
        return
    if policy.log_append_time or header.max_timestamp == NO_TIMESTAMP:
        raise InvalidTimestampError("producers may not set the LogAppendTime timestamp type")
    window = TimestampWindow.around(
        policy.now_ms, policy.timestamp_before_max_ms, policy.timestamp_after_max_ms
    )
    if not window.low <= header.max_timestamp <= window.high:
        raise InvalidTimestampError(
            f"timestamp {header.max_timestamp} outside [{window.low}, {window.high}]"
        )
