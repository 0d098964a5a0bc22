"""Domain errors raised while reading or validating record batches.

Owns: the exception types of `brokers.records`. Handlers map them to Kafka error codes in one
place (`brokers.handlers.errors`); nothing here knows about error codes. A per-record error
carries `record_index` (the record's position in its batch), which Produce v8+ reports back
as a record error (Kafka's `RecordValidationException`).
"""


class RecordError(Exception):
    """Base of every record-level problem."""

    def __init__(self, *args: object, record_index: int | None = None) -> None:
        super().__init__(*args)
        self.record_index = record_index


class CorruptRecordError(RecordError):
    """Bytes that are not a well-formed batch: bad size, bad CRC, truncated (CORRUPT_MESSAGE)."""


class InvalidRecordError(RecordError):
    """A well-formed batch that breaks a rule: bad count, no key, control batch (INVALID_RECORD)."""


class UnsupportedMagicError(RecordError):
    """Magic v0/v1 message sets; only v2 is stored (UNSUPPORTED_FOR_MESSAGE_FORMAT)."""


class RecordTooLargeError(RecordError):
    """A batch larger than max.message.bytes (MESSAGE_TOO_LARGE)."""


class DecompressedSizeError(RecordTooLargeError):
    """Compressed data that expands beyond the caller's limit (MESSAGE_TOO_LARGE on produce:
    Kafka's Java producer then splits the batch and retries, the right recovery)."""


class DecodeBudgetError(DecompressedSizeError):
    """Decoding would take more steps (snappy blocks) than the caller's budget allows: raised to
    move the work off the event loop, never to a client."""


class InvalidTimestampError(RecordError):
    """A timestamp outside message.timestamp.{before,after}.max.ms (INVALID_TIMESTAMP)."""


class UnsupportedCompressionError(RecordError):
    """A codec id we do not know (UNSUPPORTED_COMPRESSION_TYPE)."""
